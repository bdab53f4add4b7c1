package fake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/llm"
)

// The golden fixtures in testdata/golden are written by hand from the
// providers' documentation and recorded real responses. These tests compare
// the *structure* of the server's output with them: the same keys at every
// level, the same JSON kinds, the same discriminating values (type, object,
// role, stop and finish reasons) and, for streams, the same order of event
// kinds (runs of deltas collapsed, pings ignored as "may appear anywhere").

// shapeDiscriminators are keys whose values, not just kinds, must match.
var shapeDiscriminators = map[string]bool{"type": true, "object": true, "role": true, "stop_reason": true, "finish_reason": true}

// shapeNullable are keys that are null in some answers and set in others.
var shapeNullable = map[string]bool{"param": true, "code": true}

func jsonKindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// shapeDiff appends every structural difference between want and got.
func shapeDiff(path, key string, want, got any, diffs *[]string) {
	wk, gk := jsonKindOf(want), jsonKindOf(got)
	if wk != gk {
		if !(shapeNullable[key] && (wk == "null" || gk == "null")) {
			*diffs = append(*diffs, fmt.Sprintf("%s: %s in the fixture, %s from the server", path, wk, gk))
		}
		return
	}
	switch w := want.(type) {
	case map[string]any:
		g := got.(map[string]any)
		keys := map[string]bool{}
		for k := range w {
			keys[k] = true
		}
		for k := range g {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			wv, inW := w[k]
			gv, inG := g[k]
			switch {
			case !inG:
				*diffs = append(*diffs, fmt.Sprintf("%s.%s: missing from the server's output", path, k))
			case !inW:
				*diffs = append(*diffs, fmt.Sprintf("%s.%s: not in the fixture", path, k))
			default:
				shapeDiff(path+"."+k, k, wv, gv, diffs)
			}
		}
	case []any:
		g := got.([]any)
		if len(w) != len(g) {
			*diffs = append(*diffs, fmt.Sprintf("%s: %d elements in the fixture, %d from the server", path, len(w), len(g)))
		}
		for i := range min(len(w), len(g)) {
			shapeDiff(fmt.Sprintf("%s[%d]", path, i), key, w[i], g[i], diffs)
		}
	default:
		if shapeDiscriminators[key] && want != got {
			*diffs = append(*diffs, fmt.Sprintf("%s: %v in the fixture, %v from the server", path, want, got))
		}
	}
}

func goldenRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "golden", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func goldenCompareJSON(t *testing.T, name string, got []byte) {
	t.Helper()
	var w, g any
	if err := json.Unmarshal(goldenRead(t, name), &w); err != nil {
		t.Fatalf("fixture %s: %v", name, err)
	}
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("server output is not JSON: %v\n%s", err, got)
	}
	var diffs []string
	shapeDiff("$", "", w, g, &diffs)
	if len(diffs) > 0 {
		t.Errorf("%s: structure differs:\n  %s\nserver output: %s", name, strings.Join(diffs, "\n  "), got)
	}
}

// sseSig names an event's kind, for order comparison.
func sseSig(ev sseEvent) string {
	if ev.Data == "[DONE]" {
		return "[DONE]"
	}
	var d map[string]any
	if err := json.Unmarshal([]byte(ev.Data), &d); err != nil {
		return "invalid:" + ev.Name
	}
	if _, ok := d["error"]; ok && ev.Name == "" {
		return "error-object"
	}
	if ev.Name != "" { // Anthropic: name, type, delta and block types
		sig := ev.Name
		if dt, ok := srvDig(d, "delta", "type").(string); ok {
			sig += "/" + dt
		}
		if bt, ok := srvDig(d, "content_block", "type").(string); ok {
			sig += "/" + bt
		}
		return sig
	}
	// OpenAI chunk: which parts the delta carries.
	var parts []string
	if choices, _ := d["choices"].([]any); len(choices) == 0 {
		parts = append(parts, "no-choices")
	}
	delta, _ := srvDig(d, "choices", 0, "delta").(map[string]any)
	for _, k := range []string{"role", "content"} {
		if _, ok := delta[k]; ok {
			parts = append(parts, k)
		}
	}
	if tcs, ok := delta["tool_calls"].([]any); ok && len(tcs) > 0 {
		if _, head := tcs[0].(map[string]any)["id"]; head {
			parts = append(parts, "tool-head")
		} else {
			parts = append(parts, "tool-args")
		}
	}
	if fr, ok := srvDig(d, "choices", 0, "finish_reason").(string); ok {
		parts = append(parts, "finish="+fr)
	}
	if u, ok := d["usage"].(map[string]any); ok && u != nil {
		parts = append(parts, "usage")
	}
	return "chunk:" + strings.Join(parts, "+")
}

// collapse drops pings and merges runs of the same kind.
func sseCollapse(evs []sseEvent) (sigs []string, first map[string]sseEvent) {
	first = map[string]sseEvent{}
	for _, ev := range evs {
		if ev.Name == "ping" {
			continue
		}
		s := sseSig(ev)
		if _, ok := first[s]; !ok {
			first[s] = ev
		}
		if len(sigs) == 0 || sigs[len(sigs)-1] != s {
			sigs = append(sigs, s)
		}
	}
	return sigs, first
}

func goldenCompareSSE(t *testing.T, name string, got []byte) {
	t.Helper()
	want, err := parseSSE(bytes.NewReader(goldenRead(t, name)))
	if err != nil {
		t.Fatal(err)
	}
	have, err := parseSSE(bytes.NewReader(got))
	if err != nil {
		t.Fatal(err)
	}
	wsigs, wfirst := sseCollapse(want)
	hsigs, _ := sseCollapse(have)
	if !slices.Equal(wsigs, hsigs) {
		t.Errorf("%s: event order differs:\nfixture: %v\nserver:  %v", name, wsigs, hsigs)
	}
	for i, ev := range have {
		if ev.Name == "ping" {
			if ev.Data != `{"type":"ping"}` {
				t.Errorf("%s: ping data %q", name, ev.Data)
			}
			continue
		}
		w, ok := wfirst[sseSig(ev)]
		if !ok {
			continue // already reported as an order difference
		}
		if ev.Name != w.Name {
			t.Errorf("%s: event %d named %q, fixture %q", name, i, ev.Name, w.Name)
		}
		if ev.Data == "[DONE]" {
			continue
		}
		var wv, hv any
		if err := json.Unmarshal([]byte(w.Data), &wv); err != nil {
			t.Fatalf("fixture %s: %v", name, err)
		}
		if err := json.Unmarshal([]byte(ev.Data), &hv); err != nil {
			t.Errorf("%s: event %d data is not JSON: %q", name, i, ev.Data)
			continue
		}
		var diffs []string
		shapeDiff("$", "", wv, hv, &diffs)
		if len(diffs) > 0 {
			t.Errorf("%s: event %d (%s) differs:\n  %s\nserver: %s", name, i, sseSig(ev), strings.Join(diffs, "\n  "), ev.Data)
		}
	}
}

func TestGoldenAnthropic(t *testing.T) {
	t.Parallel()
	textOnly := replyWith(llm.Text("Hi there, I'm a fake."))
	withTool := replyWith(llm.Text("Let me check."), llm.ToolUse("", "get_weather", json.RawMessage(`{"city": "Paris", "unit": "celsius"}`)))
	stream := `{"model":"claude-test","max_tokens":300,"stream":true,"messages":[{"role":"user","content":"weather?"}]}`
	cases := []struct {
		golden string
		opts   Options
		path   string
		body   string
		status int
	}{
		{"anthropic_message.json", Options{Responder: textOnly}, "/v1/messages", helloAnthropic, 200},
		{"anthropic_tool_use.json", Options{Responder: withTool}, "/v1/messages", helloAnthropic, 200},
		{"anthropic_stream_tool_use.sse", Options{Responder: withTool, MaxDelta: 5}, "/v1/messages", stream, 200},
		{"anthropic_stream_error.sse", Options{Responder: withTool, Faults: map[int]Fault{1: {Kind: FaultErrorEvent, AfterBytes: 1}}}, "/v1/messages", stream, 200},
		{"anthropic_count_tokens.json", Options{}, "/v1/messages/count_tokens", `{"model":"claude-test","messages":[{"role":"user","content":"hi"}]}`, 200},
		{"anthropic_error.json", Options{}, "/v1/messages", `{"model":"claude-test","max_tokens":10,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"x","input":{}}]},{"role":"user","content":"no result"}]}`, 400},
	}
	for _, c := range cases {
		t.Run(c.golden, func(t *testing.T) {
			t.Parallel()
			_, url := srvStart(t, c.opts)
			r := srvPost(t, url, c.path, c.body, "x-api-key", "k", "anthropic-version", "2023-06-01")
			if r.status != c.status {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if !strings.HasPrefix(r.header.Get("request-id"), "req_011C") {
				t.Errorf("request-id header %q", r.header.Get("request-id"))
			}
			if strings.HasSuffix(c.golden, ".sse") {
				if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
					t.Errorf("content type %q", ct)
				}
				goldenCompareSSE(t, c.golden, r.body)
				return
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("content type %q", ct)
			}
			goldenCompareJSON(t, c.golden, r.body)
		})
	}
}

func TestGoldenOpenAI(t *testing.T) {
	t.Parallel()
	textOnly := replyWith(llm.Text("Saturn has rings."))
	oneTool := replyWith(llm.ToolUse("", "get_weather", json.RawMessage(`{"city":"Paris"}`)))
	twoTools := replyWith(llm.ToolUse("", "get_weather", json.RawMessage(`{"city":"Paris"}`)), llm.ToolUse("", "get_time", json.RawMessage(`{"tz":"CET"}`)))
	stream := `{"model":"gpt-test","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	cases := []struct {
		golden string
		opts   Options
		body   string
		status int
	}{
		{"openai_completion.json", Options{Responder: textOnly}, helloOpenAI, 200},
		{"openai_tool_calls.json", Options{Responder: oneTool}, helloOpenAI, 200},
		{"openai_stream_text.sse", Options{Responder: textOnly, MaxDelta: 4}, stream, 200},
		{"openai_stream_tool_calls.sse", Options{Responder: twoTools, MaxDelta: 4}, stream, 200},
		{"openai_stream_error.sse", Options{Responder: textOnly, Faults: map[int]Fault{1: {Kind: FaultErrorEvent, AfterBytes: 1}}}, stream, 200},
		{"openai_error.json", Options{}, `{"model":"gpt-test","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"x","arguments":"{}"}}]},{"role":"user","content":"no result"}]}`, 400},
	}
	for _, c := range cases {
		t.Run(c.golden, func(t *testing.T) {
			t.Parallel()
			_, url := srvStart(t, c.opts)
			r := srvPost(t, url, "/v1/chat/completions", c.body, "Authorization", "Bearer k")
			if r.status != c.status {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if r.header.Get("x-request-id") == "" {
				t.Error("no x-request-id header")
			}
			if strings.HasSuffix(c.golden, ".sse") {
				goldenCompareSSE(t, c.golden, r.body)
				return
			}
			goldenCompareJSON(t, c.golden, r.body)
		})
	}
}

// TestGoldenComparatorCatchesDrift makes sure the comparison can fail: a
// renamed key, a changed kind, a reordered stream and a wrong type value
// must each be reported.
func TestGoldenComparatorCatchesDrift(t *testing.T) {
	t.Parallel()
	var w any
	_ = json.Unmarshal(goldenRead(t, "anthropic_message.json"), &w)
	for name, mutate := range map[string]func(m map[string]any){
		"renamed key":  func(m map[string]any) { m["stop_reasons"] = m["stop_reason"]; delete(m, "stop_reason") },
		"changed kind": func(m map[string]any) { m["usage"].(map[string]any)["input_tokens"] = "12" },
		"wrong type":   func(m map[string]any) { m["type"] = "msg" },
		"extra key":    func(m map[string]any) { m["content"].([]any)[0].(map[string]any)["citations"] = nil },
	} {
		var g any
		_ = json.Unmarshal(goldenRead(t, "anthropic_message.json"), &g)
		mutate(g.(map[string]any))
		var diffs []string
		shapeDiff("$", "", w, g, &diffs)
		if len(diffs) == 0 {
			t.Errorf("%s: not detected", name)
		}
	}
	evs, _ := parseSSE(bytes.NewReader(goldenRead(t, "anthropic_stream_tool_use.sse")))
	evs[len(evs)-1], evs[len(evs)-2] = evs[len(evs)-2], evs[len(evs)-1]
	a, _ := sseCollapse(evs)
	orig, _ := parseSSE(bytes.NewReader(goldenRead(t, "anthropic_stream_tool_use.sse")))
	b, _ := sseCollapse(orig)
	if slices.Equal(a, b) {
		t.Error("reordered stream not detected")
	}
}
