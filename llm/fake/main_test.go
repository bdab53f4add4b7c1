package fake

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: the fake
// server runs handlers, timers and streaming writers that must all end when
// their request or server does.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
