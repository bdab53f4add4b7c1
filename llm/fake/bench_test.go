package fake

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/llm"
)

// benchServe measures whole requests over loopback HTTP with keep-alive,
// as a load test of an agent against `deputy fakellm` would run them.
func benchServe(b *testing.B, path, body string) {
	reply := replyWith(llm.Text(strings.Repeat("Some streamed answer text. ", 40)), llm.ToolUse("", "read_file", json400))
	_, url := srvStart(b, Options{Responder: reply, MaxLogged: -1})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.Cleanup(client.CloseIdleConnections)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := client.Post(url+path, "application/json", strings.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			if _, err := io.Copy(io.Discard, res.Body); err != nil {
				b.Error(err)
			}
			res.Body.Close()
			if res.StatusCode != 200 {
				b.Errorf("status %d", res.StatusCode)
			}
		}
	})
}

var json400 = []byte(`{"path":"` + strings.Repeat("dir/", 95) + `x.go"}`)

func BenchmarkAnthropicStream(b *testing.B) { benchServe(b, "/v1/messages", anthStreamBody) }
func BenchmarkAnthropicJSON(b *testing.B)   { benchServe(b, "/v1/messages", helloAnthropic) }
func BenchmarkOpenAIStream(b *testing.B)    { benchServe(b, "/v1/chat/completions", oaiStreamBody) }
