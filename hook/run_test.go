package hook

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/permission"
)

func TestPreToolUseDeniesRmRf(t *testing.T) {
	t.Parallel()
	r := project(t, one("PreToolUse", "Bash", testdata(t, "deny-rm.sh"), ""))
	o := r.Run(bg, bashCall("rm -rf /tmp/x"))
	if !o.Block || o.Permission != permission.Deny || !strings.Contains(o.Reason, "rm -rf") || o.Ran != 1 {
		t.Fatalf("rm -rf: %+v", o)
	}
	if o.PermissionReason != o.Reason {
		t.Errorf("permission reason %q, reason %q", o.PermissionReason, o.Reason)
	}
	o = r.Run(bg, bashCall("ls -la"))
	if o.Block || o.Permission != permission.Default || len(o.Errors) > 0 || o.Ran != 1 {
		t.Fatalf("ls: %+v", o)
	}
	// The matcher is Bash: a read is not shown to the hook at all.
	o = r.Run(bg, Input{Event: PreToolUse, Tool: "read_file", ToolInput: json.RawMessage(`{"path":"rm -rf"}`)})
	if o.Ran != 0 {
		t.Fatalf("read_file ran the Bash hook: %+v", o)
	}
}

func TestPreToolUseRewritesInput(t *testing.T) {
	t.Parallel()
	r := project(t, one("PreToolUse", "Bash", testdata(t, "rewrite.sh"), ""))
	o := r.Run(bg, bashCall("go test ./store/..."))
	if o.Block || o.Permission != permission.Allow || o.PermissionReason != "race detector added" {
		t.Fatalf("%+v", o)
	}
	// Back in deputy's names: timeout (ms) → timeout_s, description dropped.
	if want := `{"command":"go test -race ./store/...","timeout_s":300}`; string(o.UpdatedInput) != want {
		t.Fatalf("updated input %s, want %s", o.UpdatedInput, want)
	}
	if o = r.Run(bg, bashCall("make")); o.UpdatedInput != nil || o.Permission != permission.Default {
		t.Fatalf("make: %+v", o)
	}
}

func TestPostToolUseBlocksWithFeedback(t *testing.T) {
	t.Parallel()
	r := project(t, one("PostToolUse", "Bash", testdata(t, "post-block.sh"), ""))
	in := bashCall("go test ./...")
	in.Event, in.ToolOutput = PostToolUse, "--- FAIL: TestX\nFAIL\tdeputy/store\nexit status 1"
	o := r.Run(bg, in)
	if !o.Block || o.Reason != "The tests failed: fix them before going on." || len(o.Context) != 1 || o.Context[0] != "failing package: ./store" {
		t.Fatalf("%+v", o)
	}
	if o.Permission != permission.Default {
		t.Errorf("PostToolUse gave a permission: %v", o.Permission)
	}
	in.ToolOutput = "ok\tdeputy/store\t0.4s"
	if o = r.Run(bg, in); o.Block {
		t.Fatalf("passing run blocked: %+v", o)
	}
}

func TestSubagentStopSendsBackOnce(t *testing.T) {
	t.Parallel()
	r := project(t, one("SubagentStop", "", testdata(t, "subagent-stop.sh"), ""))
	in := Input{Event: SubagentStop, SessionID: "root", AgentID: "c1", AgentType: "explorer"}
	o := r.Run(bg, in)
	if !o.Block || !strings.Contains(o.Reason, "Check your report") {
		t.Fatalf("first stop: %+v", o)
	}
	in.StopHookActive = true
	if o = r.Run(bg, in); o.Block || o.Ran != 1 || len(o.Errors) > 0 {
		t.Fatalf("second stop: %+v", o)
	}
}

func TestStopHookGuardedByStopHookActive(t *testing.T) {
	t.Parallel()
	r := project(t, one("Stop", "", testdata(t, "stop-guard.sh"), ""))
	o := r.Run(bg, Input{Event: Stop, SessionID: "s1"})
	if !o.Block || o.Reason != "Not done yet: CHANGELOG.md is not updated." {
		t.Fatalf("first: %+v", o)
	}
	if o = r.Run(bg, Input{Event: Stop, SessionID: "s1", StopHookActive: true}); o.Block {
		t.Fatalf("active: %+v", o)
	}
}

// TestTimeoutKillsGroup: a hook whose grandchild sleeps, and which waits
// for it, is killed at its timeout (on a fake clock) with its whole group.
func TestTimeoutKillsGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	r := project(t, one("PreToolUse", "*", testdata(t, "hang.sh")+" "+pidFile, `, "timeout": 5`))
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	r.Clock = fc
	done := make(chan Outcome)
	go func() { done <- r.Run(bg, bashCall("true")) }()
	pid := waitPid(t, pidFile)
	if err := fc.WaitPending(bg, 1); err != nil {
		t.Fatal(err)
	}
	fc.Advance(4 * time.Second)
	select {
	case o := <-done:
		t.Fatalf("ended before its timeout: %+v", o)
	default:
	}
	fc.Advance(time.Second)
	o := <-done
	if o.Block || len(o.Errors) != 1 || !strings.Contains(o.Errors[0].Error(), "timed out after 5s") {
		t.Fatalf("%+v", o)
	}
	waitGone(t, pid)
}

func waitPid(t *testing.T, file string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(file)
		if err == nil {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("pid file %q", b)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatal("the hook never wrote its grandchild's pid")
		}
		time.Sleep(5 * time.Millisecond) // waiting for a real process, not for time to pass
	}
}

// waitGone waits for pid to be dead (gone, or a zombie its new parent has
// not reaped yet: it was killed either way).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || syscall.Kill(pid, 0) != nil {
			return
		}
		if f := strings.Fields(string(st)); len(f) > 2 && f[2] == "Z" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %d still alive: %s", pid, st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCancelKillsHook(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	r := project(t, one("PreToolUse", "*", testdata(t, "hang.sh")+" "+pidFile, ""))
	ctx, cancel := context.WithCancel(bg)
	done := make(chan Outcome)
	go func() { done <- r.Run(ctx, bashCall("true")) }()
	pid := waitPid(t, pidFile)
	cancel()
	o := <-done
	if len(o.Errors) != 1 || !strings.Contains(o.Errors[0].Error(), "killed with its process group") {
		t.Fatalf("%+v", o)
	}
	waitGone(t, pid)
}

func TestInvalidJSONIsPlainOutput(t *testing.T) {
	t.Parallel()
	r := project(t, one("PreToolUse", "", `echo '{"decision": "block", oops'`, ""))
	o := r.Run(bg, bashCall("ls"))
	if o.Block || o.Permission != permission.Default {
		t.Fatalf("invalid JSON decided: %+v", o)
	}
	if len(o.Output) != 1 || o.Output[0] != `{"decision": "block", oops` {
		t.Errorf("output %q", o.Output)
	}
	if !strings.Contains(errorsText(o), "not a valid answer") {
		t.Errorf("errors: %v", o.Errors)
	}
	// For UserPromptSubmit plain stdout is context; so is JSON that does not parse.
	r = project(t, one("UserPromptSubmit", "", `echo 'Today is a release day.'`, ""))
	o = r.Run(bg, Input{Event: UserPromptSubmit, Prompt: "ship it"})
	if len(o.Context) != 1 || o.Context[0] != "Today is a release day." || len(o.Output) != 0 {
		t.Fatalf("%+v", o)
	}
}

func TestNotExecutable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := filepath.Join(dir, "check.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho '{\"decision\":\"block\"}'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := project(t, one("PreToolUse", "Bash", script, ""))
	o := r.Run(bg, bashCall("ls"))
	if o.Block || o.Ran != 1 || len(o.Errors) != 1 {
		t.Fatalf("%+v", o)
	}
	if e := o.Errors[0].Error(); !strings.Contains(e, "exited 126 (not executable)") || !strings.Contains(e, "settings.json:1") {
		t.Fatalf("error %q", e)
	}
	r = project(t, one("PreToolUse", "Bash", filepath.Join(dir, "missing.sh"), ""))
	if o = r.Run(bg, bashCall("ls")); !strings.Contains(errorsText(o), "exited 127 (command not found)") {
		t.Fatalf("%+v", o)
	}
}

func TestHugeOutputIsCapped(t *testing.T) {
	t.Parallel()
	// 10 MB on stdout and on stderr at once: neither pipe may fill up.
	r := project(t, one("PostToolUse", "", `head -c 10485760 /dev/zero | tr '\0' x; head -c 10485760 /dev/zero | tr '\0' y >&2`, ""))
	r.MaxOutput = 64 << 10
	in := bashCall("ls")
	in.Event = PostToolUse
	o := r.Run(bg, in)
	if len(o.Output) != 1 || len(o.Output[0]) != 64<<10 || strings.Trim(o.Output[0], "x") != "" {
		t.Fatalf("output: %d pieces, %d bytes", len(o.Output), len(strings.Join(o.Output, "")))
	}
	e := errorsText(o)
	for _, want := range []string{"stdout cut at 65536 bytes of 10485760", "stderr cut at 65536 bytes of 10485760"} {
		if !strings.Contains(e, want) {
			t.Errorf("no %q in %s", want, e)
		}
	}
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		event   Event
		command string
		block   bool
		errSub  string
	}{
		{PreToolUse, `echo no >&2; exit 2`, true, ""},
		{PreToolUse, `echo oops >&2; exit 1`, false, "exited 1: oops"},
		{PostToolUse, `echo look >&2; exit 2`, true, ""},
		{UserPromptSubmit, `echo "no secrets" >&2; exit 2`, true, ""},
		{Notification, `echo x >&2; exit 2`, false, "Notification cannot be blocked"},
		{SessionStart, `exit 3`, false, "exited 3: no output on stderr"},
		{PreCompact, `echo '{"decision":"block","reason":"r"}'`, false, "PreCompact cannot be blocked"},
	} {
		r := project(t, one(string(c.event), "", c.command, ""))
		in := bashCall("ls")
		in.Event = c.event
		o := r.Run(bg, in)
		if o.Block != c.block || (c.errSub == "") != (len(o.Errors) == 0) || !strings.Contains(errorsText(o), c.errSub) {
			t.Errorf("%s %q: %+v", c.event, c.command, o)
		}
		if c.block && c.event == PreToolUse && o.Permission != permission.Deny {
			t.Errorf("%s exit 2: permission %v", c.event, o.Permission)
		}
	}
}

func TestContinueFalseStops(t *testing.T) {
	t.Parallel()
	r := project(t, one("PostToolUse", "", `echo '{"continue": false, "stopReason": "budget review needed", "systemMessage": "stopping", "decision": "block", "reason": "x"}'`, ""))
	in := bashCall("ls")
	in.Event = PostToolUse
	o := r.Run(bg, in)
	if !o.Stop || o.StopReason != "budget review needed" || len(o.SystemMessages) != 1 {
		t.Fatalf("%+v", o)
	}
}

// TestCombined: hooks run at once and combine in configuration order: the
// strictest permission, the first updatedInput, every context.
func TestCombined(t *testing.T) {
	t.Parallel()
	allow := `echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"fine","updatedInput":{"command":"ls -1"},"additionalContext":"first"}}'`
	ask := `sleep 0.2; echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","permissionDecisionReason":"check with a person","updatedInput":{"command":"ls -2"},"additionalContext":"second"}}'`
	third := `sleep 0.2; echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","additionalContext":"third"}}'`
	settings := `{"hooks":{"PreToolUse":[
	  {"matcher":"Bash","hooks":[{"type":"command","command":` + quote(allow) + `},{"type":"command","command":` + quote(ask) + `}]},
	  {"matcher":"Bash|Edit","hooks":[{"type":"command","command":` + quote(third) + `},{"type":"command","command":` + quote(allow) + `}]}]}}`
	r := project(t, settings)
	start := time.Now()
	o := r.Run(bg, bashCall("ls"))
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("took %s", el)
	}
	if o.Ran != 3 { // allow is named twice and runs once
		t.Fatalf("ran %d", o.Ran)
	}
	if o.Permission != permission.Ask || o.PermissionReason != "check with a person" || string(o.UpdatedInput) != `{"command":"ls -1"}` {
		t.Fatalf("%+v", o)
	}
	if strings.Join(o.Context, ",") != "first,second,third" {
		t.Errorf("context %q", o.Context)
	}
	if !strings.Contains(errorsText(o), "updatedInput ignored") {
		t.Errorf("errors %v", o.Errors)
	}
}

func TestUpdatedInputThatCannotMapBlocks(t *testing.T) {
	t.Parallel()
	r := project(t, one("PreToolUse", "Edit", `echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","updatedInput":{"file_path":"a.go","old_string":"x","new_string":"y","replace_all":true}}}'`, ""))
	o := r.Run(bg, Input{Event: PreToolUse, Tool: "edit_file", ToolInput: json.RawMessage(`{"path":"a.go","old":"x","new":"y"}`)})
	if !o.Block || o.Permission != permission.Deny || !strings.Contains(o.Reason, "replace_all") || o.UpdatedInput != nil {
		t.Fatalf("%+v", o)
	}
}

func TestInputAndEnvironment(t *testing.T) {
	t.Parallel()
	r := project(t, one("PreToolUse", "Read", `cat > "$CLAUDE_PROJECT_DIR/in.json"; pwd > "$CLAUDE_PROJECT_DIR/pwd"; env > "$CLAUDE_PROJECT_DIR/env"`, ""))
	r.Env = append(r.Env, "ANTHROPIC_API_KEY=sk-secret", "MY_SETTING=1")
	in := Input{Event: PreToolUse, SessionID: "s1", TranscriptPath: "/t/s1.jsonl", PermissionMode: "acceptEdits",
		Tool: "read_file", ToolInput: json.RawMessage(`{"path": "src/a.go", "limit": 5}`), ToolUseID: "toolu_9"}
	if o := r.Run(bg, in); len(o.Errors) > 0 || o.Ran != 1 {
		t.Fatalf("%+v", o)
	}
	got, _ := os.ReadFile(filepath.Join(r.ProjectDir, "in.json"))
	want := `{"session_id":"s1","transcript_path":"/t/s1.jsonl","cwd":"` + r.ProjectDir + `","permission_mode":"acceptEdits",` +
		`"hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{"file_path":"` + r.ProjectDir + `/src/a.go","limit":5},"tool_use_id":"toolu_9"}`
	if string(got) != want {
		t.Errorf("stdin\n%s\nwant\n%s", got, want)
	}
	if pwd, _ := os.ReadFile(filepath.Join(r.ProjectDir, "pwd")); strings.TrimSpace(string(pwd)) != r.ProjectDir {
		t.Errorf("ran in %s", pwd)
	}
	env, _ := os.ReadFile(filepath.Join(r.ProjectDir, "env"))
	if !strings.Contains(string(env), "CLAUDE_PROJECT_DIR="+r.ProjectDir+"\n") || strings.Contains(string(env), "sk-secret") || strings.Contains(string(env), "MY_SETTING") {
		t.Errorf("env:\n%s", env)
	}
	r.PassEnv = []string{"MY_SETTING", "ANTHROPIC_API_KEY"}
	r.Run(bg, in)
	env, _ = os.ReadFile(filepath.Join(r.ProjectDir, "env"))
	if !strings.Contains(string(env), "MY_SETTING=1") || strings.Contains(string(env), "sk-secret") {
		t.Errorf("env with PassEnv:\n%s", env)
	}
}

func TestEventInputs(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   Input
		want string
	}{
		{Input{Event: UserPromptSubmit, SessionID: "s", Cwd: "/w", Prompt: "fix 2>&1 & <b>"},
			`{"session_id":"s","transcript_path":"","cwd":"/w","hook_event_name":"UserPromptSubmit","prompt":"fix 2>&1 & <b>"}`},
		{Input{Event: Stop, SessionID: "s", Cwd: "/w"},
			`{"session_id":"s","transcript_path":"","cwd":"/w","hook_event_name":"Stop","stop_hook_active":false}`},
		{Input{Event: SubagentStop, SessionID: "s", Cwd: "/w", StopHookActive: true, AgentID: "c1", AgentType: "explorer", AgentTranscriptPath: "/t/c1.jsonl"},
			`{"session_id":"s","transcript_path":"","cwd":"/w","hook_event_name":"SubagentStop","stop_hook_active":true,"agent_id":"c1","agent_type":"explorer","agent_transcript_path":"/t/c1.jsonl"}`},
		{Input{Event: SubagentStart, SessionID: "s", Cwd: "/w", AgentID: "c1", AgentType: "explorer"},
			`{"session_id":"s","transcript_path":"","cwd":"/w","hook_event_name":"SubagentStart","agent_id":"c1","agent_type":"explorer"}`},
		{Input{Event: PreCompact, SessionID: "s", Cwd: "/w", Trigger: "auto"},
			`{"session_id":"s","transcript_path":"","cwd":"/w","hook_event_name":"PreCompact","trigger":"auto","custom_instructions":""}`},
		{Input{Event: SessionStart, SessionID: "s", Cwd: "/w", Source: "resume"},
			`{"session_id":"s","transcript_path":"","cwd":"/w","hook_event_name":"SessionStart","source":"resume"}`},
		{Input{Event: SessionEnd, SessionID: "s", Cwd: "/w", Reason: "other"},
			`{"session_id":"s","transcript_path":"","cwd":"/w","hook_event_name":"SessionEnd","reason":"other"}`},
		{Input{Event: Notification, SessionID: "s", Cwd: "/w", Message: "deputy needs your approval", NotificationType: "permission_prompt"},
			`{"session_id":"s","transcript_path":"","cwd":"/w","hook_event_name":"Notification","message":"deputy needs your approval","notification_type":"permission_prompt"}`},
		{Input{Event: PostToolUse, SessionID: "s", Cwd: "/w", Tool: "write_file", ToolInput: json.RawMessage(`{"path":"a.txt","content":"hi"}`), ToolUseID: "t1", ToolOutput: "wrote 2 bytes"},
			`{"session_id":"s","transcript_path":"","cwd":"/w","hook_event_name":"PostToolUse","tool_name":"Write","tool_input":{"file_path":"/w/a.txt","content":"hi"},"tool_response":{"filePath":"/w/a.txt","success":true,"output":"wrote 2 bytes"},"tool_use_id":"t1"}`},
	} {
		got, err := c.in.Encode("/w")
		if err != nil || string(got) != c.want {
			t.Errorf("%s:\n got %s (%v)\nwant %s", c.in.Event, got, err, c.want)
		}
	}
}

func TestHTTPHook(t *testing.T) {
	t.Parallel()
	var got struct {
		body   map[string]any
		auth   string
		leak   string
		ctype  string
		called int
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		got.called++
		got.auth, got.leak, got.ctype = req.Header.Get("Authorization"), req.Header.Get("X-Leak"), req.Header.Get("Content-Type")
		_ = json.NewDecoder(req.Body).Decode(&got.body)
		if got.body["tool_name"] == "WebFetch" {
			http.Error(w, "upstream broke", http.StatusBadGateway)
			return
		}
		_, _ = w.Write([]byte(`{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"policy server says no"}}`))
	}))
	defer srv.Close()
	settings := `{"hooks":{"PreToolUse":[{"matcher":"*","hooks":[{"type":"http","url":"` + srv.URL + `/hook","timeout":5,
	  "headers":{"Authorization":"Bearer $HOOK_TOKEN","X-Leak":"$ANTHROPIC_API_KEY$OTHER"},"allowedEnvVars":["HOOK_TOKEN","ANTHROPIC_API_KEY"]}]}]}}`
	r := project(t, settings)
	r.Env = []string{"HOOK_TOKEN=tok123", "ANTHROPIC_API_KEY=sk-secret", "OTHER=o"}
	o := r.Run(bg, bashCall("ls"))
	if !o.Block || o.Permission != permission.Deny || o.Reason != "policy server says no" {
		t.Fatalf("%+v", o)
	}
	if got.auth != "Bearer tok123" || got.leak != "" || got.ctype != "application/json" || got.body["hook_event_name"] != "PreToolUse" || got.body["tool_name"] != "Bash" {
		t.Errorf("request: %+v", got)
	}
	o = r.Run(bg, Input{Event: PreToolUse, Tool: "web_fetch", ToolInput: json.RawMessage(`{"url":"https://example.com"}`)})
	if o.Block || !strings.Contains(errorsText(o), "HTTP 502 Bad Gateway: upstream broke") {
		t.Fatalf("502: %+v", o)
	}
}

func TestHTTPHookTimeoutAndRedaction(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case <-release:
		case <-req.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	u := strings.Replace(srv.URL, "http://", "http://user:hunter2@", 1)
	r := project(t, `{"hooks":{"Stop":[{"hooks":[{"type":"http","url":"`+u+`","timeout":2}]}]}}`)
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	r.Clock = fc
	done := make(chan Outcome)
	go func() { done <- r.Run(bg, Input{Event: Stop}) }()
	if err := fc.WaitPending(bg, 1); err != nil {
		t.Fatal(err)
	}
	fc.Advance(2 * time.Second)
	o := <-done
	e := errorsText(o)
	if o.Block || !strings.Contains(e, "timed out after 2s") || strings.Contains(e, "hunter2") || !strings.Contains(e, "user:xxxxx@") {
		t.Fatalf("%q", e)
	}
}

func TestTranscriptReadByHook(t *testing.T) {
	t.Parallel()
	r := project(t, one("Stop", "", testdata(t, "transcript-lines.sh"), ""))
	tp := filepath.Join(r.ProjectDir, "transcripts", "s1.jsonl")
	tr, err := OpenTranscript(tp, TranscriptOptions{SessionID: "s1", Cwd: r.ProjectDir})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	conv := []llm.Message{llm.UserText("list files"),
		{Role: llm.Assistant, Content: []llm.Block{llm.Text("ok"), llm.ToolUse("t1", "bash", json.RawMessage(`{"command":"ls"}`))}},
		{Role: llm.User, Content: []llm.Block{llm.ToolResult("t1", "a\nb", false)}}}
	if err := tr.Sync(conv[:2]); err != nil {
		t.Fatal(err)
	}
	if err := tr.Sync(conv); err != nil {
		t.Fatal(err)
	}
	o := r.Run(bg, Input{Event: Stop, SessionID: "s1", TranscriptPath: tr.Path()})
	if len(o.Output) != 1 || o.Output[0] != "lines=3 whole=yes first=user" {
		t.Fatalf("%+v", o)
	}
}

func TestNoHooksIsFree(t *testing.T) {
	t.Parallel()
	var r *Runner
	if o := r.Run(bg, bashCall("ls")); o.Ran != 0 || r.Has(PreToolUse) {
		t.Fatal("nil runner ran")
	}
	r = project(t, one("PostToolUse", "", "exit 2", ""))
	if r.Has(PreToolUse) || !r.Has(PostToolUse) {
		t.Fatal("Has")
	}
	if o := r.Run(bg, bashCall("ls")); o.Ran != 0 || o.Block {
		t.Fatalf("%+v", o)
	}
}

func TestStarterRunsCommands(t *testing.T) {
	t.Parallel()
	r := project(t, one("Stop", "", `echo "$FENCED"`, ""))
	s := &recordingStarter{}
	r.Starter = s
	o := r.Run(bg, Input{Event: Stop})
	if s.started != 1 || s.ended != 1 || len(o.Output) != 1 || o.Output[0] != "yes" {
		t.Fatalf("starter %+v, outcome %+v", s, o)
	}
	if !strings.Contains(errorsText(o), "fence note") {
		t.Errorf("the fence's note is not reported: %v", o.Errors)
	}
	r.Starter = failingStarter{}
	if o = r.Run(bg, Input{Event: Stop}); !strings.Contains(errorsText(o), "could not start: no fence") {
		t.Fatalf("%+v", o)
	}
}

// recordingStarter stands for a fence: it changes the command's
// environment and counts starts and ends.
type recordingStarter struct{ started, ended int }

func (s *recordingStarter) Start(cmd *exec.Cmd) (func() string, error) {
	s.started++
	cmd.Env = append(cmd.Env, "FENCED=yes")
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return func() string { s.ended++; return "fence note" }, nil
}

type failingStarter struct{}

func (failingStarter) Start(*exec.Cmd) (func() string, error) { return nil, errors.New("no fence") }

func TestOutcomeJSON(t *testing.T) {
	t.Parallel()
	o := Outcome{Block: true, Reason: "r", Permission: permission.Deny, PermissionReason: "pr", UpdatedInput: json.RawMessage(`{"a":1}`),
		Context: []string{"c"}, Stop: true, StopReason: "s", SystemMessages: []string{"m"}, Output: []string{"o"},
		Errors: []error{errors.New("e1")}, Ran: 2}
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var back Outcome
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	b2, _ := json.Marshal(back)
	if string(b) != string(b2) || back.Permission != permission.Deny || back.Errors[0].Error() != "e1" {
		t.Fatalf("%s\n%s", b, b2)
	}
	if err := json.Unmarshal([]byte(`{"permission":"maybe"}`), &back); err == nil {
		t.Fatal("bad permission read")
	}
}

// TestEscapedChildDoesNotBlock: a hook that exits but leaves a process
// outside its group holding stdout (setsid) is answered after WaitDelay,
// with what it printed and a note, rather than waiting on the pipe.
func TestEscapedChildDoesNotBlock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	r := project(t, one("Stop", "", `setsid sh -c 'echo $$ > `+pidFile+`.tmp && mv `+pidFile+`.tmp `+pidFile+`; exec sleep 30' & while [ ! -e `+pidFile+` ]; do sleep 0.01; done; echo answered`, ""))
	r.WaitDelay = 50 * time.Millisecond
	o := r.Run(bg, Input{Event: Stop})
	pid := waitPid(t, pidFile)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if len(o.Output) != 1 || o.Output[0] != "answered" || !strings.Contains(errorsText(o), "output still held open") {
		t.Fatalf("%+v", o)
	}
}
