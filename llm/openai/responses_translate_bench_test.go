package openai

import (
	"testing"

	"github.com/openai/openai-go/v3/responses"

	"github.com/deputy-run/deputy/llm/providertest"
)

// BenchmarkResponsesTranslate is deputy's own work per Responses API turn,
// without HTTP: the request to SDK params and the SDK response back.
func BenchmarkResponsesTranslate(b *testing.B) {
	m, err := New("fake-model", Options{APIKey: "k", Responses: true})
	if err != nil {
		b.Fatal(err)
	}
	req := providertest.BenchRequest()
	var r responses.Response
	if err := r.UnmarshalJSON([]byte(`{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"fake-model","output":[` +
		`{"id":"rs_1","type":"reasoning","summary":[],"encrypted_content":"gAAAAABaGVsbG8gdGhlcmUsIHRoaXMgaXMgYSB0b2tlbg"},` +
		`{"id":"msg_1","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"I will now run the test suite and look at the failures.","annotations":[]}]},` +
		`{"id":"fc_1","type":"function_call","status":"completed","call_id":"call_1","name":"read_file","arguments":"{\"path\": \"pkg/parser_test.go\"}"}],` +
		`"usage":{"input_tokens":3050,"input_tokens_details":{"cached_tokens":2944},"output_tokens":20,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":3070}}`)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.responseParams(req); err != nil {
			b.Fatal(err)
		}
		_ = fromResponse(&r, r.Output)
	}
}
