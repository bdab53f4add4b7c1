package hook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/deputy-run/deputy/hook"
	"github.com/deputy-run/deputy/permission"
)

// The agent loop's side of a PreToolUse hook: build the Input from the
// call in deputy's terms, run, act on the Outcome.
func ExampleRunner_Run() {
	dir, _ := os.MkdirTemp("", "hook-example")
	defer os.RemoveAll(dir)
	script, _ := filepath.Abs("testdata/deny-rm.sh")
	settings := filepath.Join(dir, ".claude", "settings.json")
	_ = os.MkdirAll(filepath.Dir(settings), 0o755)
	_ = os.WriteFile(settings, []byte(`{"hooks": {"PreToolUse": [{"matcher": "Bash",
	  "hooks": [{"type": "command", "command": "`+script+`"}]}]}}`), 0o644)

	cfg, err := hook.LoadSettings(permission.SettingsPaths(dir, "")...)
	if err != nil {
		fmt.Println(err)
		return
	}
	r := &hook.Runner{Config: cfg, ProjectDir: dir}
	o := r.Run(context.Background(), hook.Input{Event: hook.PreToolUse, SessionID: "s1",
		Tool: "bash", ToolInput: json.RawMessage(`{"command":"rm -rf build"}`), ToolUseID: "toolu_1"})
	switch {
	case o.Permission == permission.Deny:
		fmt.Println("denied:", o.Reason)
	case o.UpdatedInput != nil:
		fmt.Println("run with", string(o.UpdatedInput))
	default:
		fmt.Println("run as asked")
	}
	// Output: denied: Destructive command blocked by policy: rm -rf
}
