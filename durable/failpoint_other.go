//go:build !unix

package durable

func (e *Engine) failpoint(string) {}
