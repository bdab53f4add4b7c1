package anthropic

import (
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/deputy-run/deputy/llm/providertest"
)

// BenchmarkTranslate is deputy's own work per turn, without HTTP: the
// request to SDK params (with breakpoints) and the SDK message back to a
// response. The per-call benchmarks against the fake server measure the
// same plus the SDK and the server, where machine noise hides a few
// percent; this one is exact.
func BenchmarkTranslate(b *testing.B) {
	m, err := New("fake-model", Options{APIKey: "k"})
	if err != nil {
		b.Fatal(err)
	}
	req := providertest.BenchRequest()
	var msg sdk.Message
	if err := msg.UnmarshalJSON([]byte(`{"id":"msg_01","type":"message","role":"assistant","model":"fake-model","content":[` +
		`{"type":"text","text":"I will now run the test suite and look at the failures."},` +
		`{"type":"tool_use","id":"toolu_bench","name":"read_file","input":{"path": "pkg/parser_test.go", "lines": [1, 200]}}],` +
		`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":20,"cache_read_input_tokens":3000,"cache_creation_input_tokens":40}}`)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.params(req); err != nil {
			b.Fatal(err)
		}
		_ = toResponse(&msg, nil)
	}
}
