package fake

import (
	"encoding/json"
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

// TestOpenAINodeSDK runs testdata/openai_node_client.js, the official
// openai Node SDK's tool round trip (the assistant message appended as
// received), streaming with include_usage, runTools and parse with a
// json_schema, against the fake over HTTP. It needs node and a directory
// holding node_modules/openai and node_modules/zod
// (DEPUTY_OPENAI_NODE_MODULES; `npm install openai@6.49.0 zod` there).
func TestOpenAINodeSDK(t *testing.T) {
	t.Parallel()
	dir := os.Getenv("DEPUTY_OPENAI_NODE_MODULES")
	node, err := exec.LookPath("node")
	if dir == "" || err != nil {
		t.Skip("needs node and DEPUTY_OPENAI_NODE_MODULES (a directory with node_modules/openai and zod)")
	}
	s, url := srvStart(t, Options{Responder: weatherResponder()})
	script, err := filepath.Abs("testdata/openai_node_client.js")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), node, script)
	cmd.Env = append(os.Environ(), "FAKE_BASE_URL="+url, "NODE_PATH="+filepath.Join(dir, "node_modules"))
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
