package openai

import (
	"testing"

	sdk "github.com/openai/openai-go/v3"

	"github.com/deputy-run/deputy/llm/providertest"
)

// BenchmarkTranslate is deputy's own work per turn, without HTTP: the
// request to SDK params and the SDK completion back to a response.
func BenchmarkTranslate(b *testing.B) {
	m, err := New("fake-model", Options{APIKey: "k"})
	if err != nil {
		b.Fatal(err)
	}
	req := providertest.BenchRequest()
	var cc sdk.ChatCompletion
	if err := cc.UnmarshalJSON([]byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"fake-model","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant",` +
		`"content":"I will now run the test suite and look at the failures.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\"path\": \"pkg/parser_test.go\"}"}}]}}],` +
		`"usage":{"prompt_tokens":3050,"completion_tokens":20,"total_tokens":3070,"prompt_tokens_details":{"cached_tokens":2944}}}`)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.params(req); err != nil {
			b.Fatal(err)
		}
		_ = toResponse(&cc, nil)
	}
}
