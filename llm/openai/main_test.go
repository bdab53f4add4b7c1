package openai_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Streams, retries and the test servers' handlers must all end with their
// calls.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
