//go:build !linux

package cgroup

import "errors"

var errUnsupported = errors.New("the sandbox needs Linux")

// New makes no cgroup: cgroups are Linux's.
func New(Limits) (*Group, map[string]error) {
	why := map[string]error{}
	for _, c := range Controllers {
		why[c] = errUnsupported
	}
	return nil, why
}
