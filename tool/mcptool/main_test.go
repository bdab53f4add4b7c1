package mcptool_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/deputy-run/deputy/tool/mcptool/mcptest"
)

func TestMain(m *testing.M) {
	mcptest.MaybeServe() // the tests start this binary again as their MCP server
	goleak.VerifyTestMain(m)
}
