package fake

import "testing"

// The Responses wire's requests/s over loopback HTTP, beside the others'
// (bench_test.go's benchServe, the same reply: text and a tool call).

func BenchmarkResponsesStream(b *testing.B) { benchServe(b, "/v1/responses", respStreamBody) }
func BenchmarkResponsesJSON(b *testing.B)   { benchServe(b, "/v1/responses", respPlainBody) }
