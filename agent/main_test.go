package agent

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/deputy-run/deputy/tool/mcptool/mcptest"
)

func TestMain(m *testing.M) {
	mcptest.MaybeServe() // the MCP tests start this binary again as their stdio server
	goleak.VerifyTestMain(m)
}
