//go:build !unix

package serve

// nofile has no limit to read here: Windows' handles are not capped the
// same way, so the budget is the one of a typical unix limit.
func nofile() int { return 1 << 16 }
