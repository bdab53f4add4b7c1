package clients

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a check leaves a goroutine behind: each fake
// has a reader of its stdout and each client run its exec plumbing, which
// must all end with their processes.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
