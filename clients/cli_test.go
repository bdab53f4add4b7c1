package clients

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// codeWord is what the CLIs' file holds and the scenarios quote back.
const codeWord = "deputy-codeword-5521"

// workspace is a CLI's working directory with the file it is asked about.
func workspace(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("The code word is "+codeWord+".\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func cliChecks() []check {
	return []check{
		{"claude-code/print", claudeCode},
		{"claude-code/subagent", claudeCodeSubagent},
		{"codex/exec", codex},
		{"codex/apply_patch", codexPatch},
		{"codex/exec code mode", codexCodeMode},
	}
}

// claudeCode has Claude Code read the file with its own Read tool.
func claudeCode(t *testing.T, m *matrix) {
	f := startFake(t, m.deputy, "claude-code.yaml")
	dir := workspace(t)
	out := runClaude(t, m, f, dir, "Read the file "+filepath.Join(dir, "notes.txt")+" and tell me its code word.")
	if !strings.Contains(out, "The file says: "+codeWord) {
		t.Errorf("claude -p printed %q, want the scenario's answer quoting %s", excerpt(out, 2000), codeWord)
	}
	// Claude Code 2.1.332 makes exactly these two requests for the task
	// (streamed, as it always does), none of them refused and retried.
	trips{path: "/v1/messages", requests: 2, streamed: 2, carries: codeWord}.expect(t, f)
	wantBlock(t, f, "/v1/messages", "tool_result", codeWord)
}

// claudeCodeSubagent has Claude Code delegate the reading to a subagent of
// its own (its Agent tool): four requests, the subagent's two between the
// main agent's.
func claudeCodeSubagent(t *testing.T, m *matrix) {
	f := startFake(t, m.deputy, "claude-code-subagent.yaml")
	dir := workspace(t)
	out := runClaude(t, m, f, dir, "Use a subagent to read the file "+filepath.Join(dir, "notes.txt")+" and tell me its code word.")
	if !strings.Contains(out, "The subagent found: "+codeWord) {
		t.Errorf("claude -p printed %q, want the scenario's answer from the subagent's report", excerpt(out, 2000))
	}
	trips{path: "/v1/messages", requests: 4, streamed: 4, carries: codeWord}.expect(t, f)
	wantBlock(t, f, "/v1/messages", "tool_result", "Code word: "+codeWord)
}

// runClaude runs `claude -p TASK` in dir with Claude Code's defaults: only
// the fake's address and key, a private HOME, and
// CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 (its documented switch for
// autoupdater, error reporting, telemetry and the bug command together), so
// nothing but model requests leaves it. It returns what claude printed.
func runClaude(t *testing.T, m *matrix, f *fakeLLM, dir, task string) string {
	t.Helper()
	c := client{name: "claude -p", dir: dir, args: []string{filepath.Join(m.modules, ".bin", "claude"), "-p", task}, env: []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + t.TempDir(),
		"ANTHROPIC_BASE_URL=" + f.URL,
		"ANTHROPIC_API_KEY=" + fakeKey,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	}}
	return c.run(t)
}

// codexConfig is codex's config.toml: model on a provider at the fake speaking
// the Responses API, its key read from DEPUTY_FAKE_KEY. Retries are off, so a
// refused request fails the check instead of being retried out of sight;
// analytics and the update check are off (checked with --strict-config,
// which refuses keys this version does not know).
func codexConfig(f *fakeLLM, model string) string {
	return `model = "` + model + `"
model_provider = "deputy"
check_for_update_on_startup = false

[analytics]
enabled = false

[model_providers.deputy]
name = "deputy fakellm"
base_url = "` + f.URL + `/v1"
env_key = "DEPUTY_FAKE_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
`
}

// codex runs `codex exec` in its default read-only sandbox: it reads the
// file with exec_command.
func codex(t *testing.T, m *matrix) {
	f := startFake(t, m.deputy, "codex.yaml")
	dir := workspace(t)
	out := runCodex(t, m, f, codexClassic, dir, "Print the code word in notes.txt.")
	if !strings.Contains(out, "The file says: "+codeWord) {
		t.Errorf("codex exec printed %q, want the scenario's answer quoting %s", excerpt(out, 2000), codeWord)
	}
	trips{path: "/v1/responses", requests: 2, streamed: 2, carries: codeWord}.expect(t, f)
	wantBlock(t, f, "/v1/responses", "function_call_output", codeWord)
	// The first turn's reasoning went back whole (the fake refuses an
	// altered encrypted_content).
	wantBlock(t, f, "/v1/responses", "reasoning", `"encrypted_content"`)
}

// codexPatch runs `codex exec --sandbox workspace-write`: it writes a file
// with apply_patch, a custom (freeform) tool whose call carries the patch
// as text.
func codexPatch(t *testing.T, m *matrix) {
	f := startFake(t, m.deputy, "codex-patch.yaml")
	dir := t.TempDir()
	out := runCodex(t, m, f, codexClassic, dir, "Create hello.txt holding the code word.", "--sandbox", "workspace-write")
	b, err := os.ReadFile(filepath.Join(dir, "hello.txt"))
	if err != nil || strings.TrimSpace(string(b)) != codeWord {
		t.Errorf("hello.txt after codex exec: %q, %v; want the patch's %s\nstdout: %s", b, err, codeWord, excerpt(out, 2000))
	}
	if !strings.Contains(out, "Patched: ") {
		t.Errorf("codex exec printed %q, want the scenario's report of the patch", excerpt(out, 2000))
	}
	trips{path: "/v1/responses", requests: 2, streamed: 2, carries: "hello.txt"}.expect(t, f)
	wantBlock(t, f, "/v1/responses", "custom_tool_call_output", "hello.txt")
}

// codexCodeMode runs codex on a current model (one the fake's /v1/models
// lists), where it offers its tools in an additional_tools input item and
// works through exec, a custom tool running JavaScript that calls the others.
func codexCodeMode(t *testing.T, m *matrix) {
	f := startFake(t, m.deputy, "codex-code-mode.yaml")
	dir := workspace(t)
	out := runCodex(t, m, f, "gpt-5.6-terra", dir, "Print the code word in notes.txt.")
	if !strings.Contains(out, "The file says: "+codeWord) {
		t.Errorf("codex exec printed %q, want the scenario's answer quoting %s", excerpt(out, 2000), codeWord)
	}
	trips{path: "/v1/responses", requests: 2, streamed: 2, carries: codeWord}.expect(t, f)
	wantBlock(t, f, "/v1/responses", "custom_tool_call_output", codeWord)
}

// codexClassic is a model Codex 0.171.0 offers its tools to the classic way
// (top-level function and custom tools, exec_command among them).
const codexClassic = "gpt-5.5"

// runCodex runs `codex exec [flags] TASK` on model in dir, on a fresh
// CODEX_HOME holding codexConfig, and returns what it printed on stdout
// (its answer).
func runCodex(t *testing.T, m *matrix, f *fakeLLM, model, dir, task string, flags ...string) string {
	t.Helper()
	home := codexHomeDir(t)
	codexHome := filepath.Join(home, ".codex")
	if err := os.MkdirAll(codexHome, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(codexConfig(f, model)), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{m.node, filepath.Join(m.modules, ".bin", "codex"), "exec", "--strict-config", "--skip-git-repo-check"}, flags...)
	c := client{name: "codex exec", dir: dir, env: []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"CODEX_HOME=" + codexHome,
		"DEPUTY_FAKE_KEY=" + fakeKey,
	}, args: append(args, task)}
	return c.run(t)
}

// codexHomeDir is a private HOME for codex outside the temporary directory:
// codex refuses to create its sandbox helper (codex-linux-sandbox, which its
// bubblewrap sandbox runs commands through) under the temporary directory,
// and every command then fails with "bwrap: execvp codex-linux-sandbox: No
// such file or directory". The user's cache directory is not temporary.
func codexHomeDir(t *testing.T) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("a home for codex outside the temporary directory: %v", err)
	}
	base := filepath.Join(cache, "deputy-clients")
	if err := os.MkdirAll(base, 0o700); err != nil {
		t.Fatal(err)
	}
	home, err := os.MkdirTemp(base, "codex-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(home) })
	return home
}

// wantBlock fails unless some request the fake got on path holds a block
// or item of type kind (tool_result, function_call_output, reasoning) with
// text in it: the client ran its tool and sent the output back, or sent an
// item back.
func wantBlock(t *testing.T, f *fakeLLM, path, kind, text string) {
	t.Helper()
	var seen []logged
	for _, r := range f.requests(t) {
		if r.Path != path {
			continue
		}
		seen = append(seen, r)
		var body any
		if json.Unmarshal(r.Request, &body) == nil && holds(body, kind, text) {
			return
		}
	}
	t.Errorf("no request on %s held a %s with %q:\n%s", path, kind, text, listLogged(seen))
}

// holds reports whether v has, at any depth, an object of type kind whose
// JSON contains text.
func holds(v any, kind, text string) bool {
	switch v := v.(type) {
	case map[string]any:
		if v["type"] == kind {
			b, _ := json.Marshal(v)
			if strings.Contains(string(b), text) {
				return true
			}
		}
		for _, x := range v {
			if holds(x, kind, text) {
				return true
			}
		}
	case []any:
		for _, x := range v {
			if holds(x, kind, text) {
				return true
			}
		}
	}
	return false
}
