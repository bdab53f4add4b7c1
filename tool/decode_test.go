package tool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/tool"
)

// optionalArgs is a tool whose arguments are all optional and which
// decodes them with tool.Decode, as the built-in tools do.
type optionalArgs struct{}

type optionalIn struct {
	N    int64  `json:"n"`
	Name string `json:"name"`
}

func (optionalArgs) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: "opt", InputSchema: json.RawMessage(
		`{"type":"object","properties":{"n":{"type":"integer"},"name":{"type":"string"}},"additionalProperties":false}`)}
}
func (optionalArgs) ReadOnly() bool { return true }
func (optionalArgs) Run(_ context.Context, input json.RawMessage) (string, error) {
	in, err := tool.Decode[optionalIn](input)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("n=%d name=%q", in.N, in.Name), nil
}

// Through Set.Call: what the schema accepts, Decode reads, including no
// input at all (which Set.Call validates as {}).
func TestDecodeThroughCall(t *testing.T) {
	t.Parallel()
	set := tool.MustSet(optionalArgs{})
	tests := []struct {
		input, want string
		isErr       bool
	}{
		{``, `n=0 name=""`, false},
		{"  \n", `n=0 name=""`, false},
		{`{}`, `n=0 name=""`, false},
		{`{"n": 7, "name": "x"}`, `n=7 name="x"`, false},
		// The schema allows any integer; int64 cannot hold this one.
		{`{"n": 99999999999999999999}`, "invalid arguments: json: cannot unmarshal number 99999999999999999999", true},
		{`{"n": "7"}`, "invalid arguments for opt", true}, // the schema stops it first
	}
	for _, tc := range tests {
		out, isErr := set.Call(context.Background(), "opt", json.RawMessage(tc.input))
		if isErr != tc.isErr || !strings.Contains(out, tc.want) {
			t.Errorf("%q: got %q (err=%v), want %q (err=%v)", tc.input, out, isErr, tc.want, tc.isErr)
		}
	}
}

func TestDecodeDirect(t *testing.T) {
	t.Parallel()
	if v, err := tool.Decode[map[string]int](json.RawMessage(`{"a":1}`)); err != nil || v["a"] != 1 {
		t.Errorf("got %v, %v", v, err)
	}
	if _, err := tool.Decode[optionalIn](json.RawMessage(`[1]`)); err == nil || !strings.HasPrefix(err.Error(), "invalid arguments: ") {
		t.Errorf("got %v", err)
	}
}

// TestBadArguments: the result quotes what was sent, cut at SentLimit
// bytes on a rune boundary, and says the call did not run.
func TestBadArguments(t *testing.T) {
	t.Parallel()
	why := fmt.Errorf("arguments are not valid JSON: unexpected end of JSON input")
	got := tool.BadArguments("bash", why, `{"command": "echo hi"`)
	want := "invalid arguments for bash: arguments are not valid JSON: unexpected end of JSON input; you sent: {\"command\": \"echo hi\"\n" +
		"The call was not run. Call bash again with its arguments as one JSON object."
	if got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	long := `{"content": "` + strings.Repeat("é", 400) // 2 bytes a rune: the limit falls mid-rune
	got = tool.BadArguments("write_file", why, long)
	sent := got[strings.Index(got, "you sent: ")+len("you sent: ") : strings.Index(got, "…")]
	if len(sent) > tool.SentLimit || !strings.HasPrefix(long, sent) || !utf8.ValidString(sent) || len(sent) < tool.SentLimit-1 {
		t.Errorf("quoted %d bytes %q", len(sent), sent)
	}
	if !strings.Contains(got, fmt.Sprintf("(%d bytes in all)", len(long))) {
		t.Errorf("no total in %q", got)
	}
}
