package retry

import (
	"testing"

	"go.uber.org/goleak"
)

// Do sleeps on clock timers and the watchdog re-arms its own; none may
// outlive a call.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
