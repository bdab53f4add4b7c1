//go:build !unix

package permission

import "time"

// processCPU is not measured here: reportCPU then reports nothing.
func processCPU() time.Duration { return 0 }
