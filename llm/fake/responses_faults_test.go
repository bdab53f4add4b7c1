package fake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
)

// Every fault the other wires have, on the Responses wire in its shape.

const (
	respPlainBody  = `{"model":"m","input":"hi"}`
	respStreamBody = `{"model":"m","input":"hi","stream":true}`
)

func TestResponsesSDKSeesStatusFaults(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		kind   FaultKind
		status int
		typ    string
		code   string
	}{
		{FaultRateLimit, 429, "requests", "rate_limit_exceeded"},
		{FaultOverloaded, 503, "server_error", ""},
		{FaultServerError, 500, "server_error", ""},
		{FaultErrorEvent, 503, "server_error", ""}, // no stream: the status a client sees instead
	} {
		for _, stream := range []bool{false, true} {
			_, url := srvStart(t, Options{Faults: map[int]Fault{1: {Kind: c.kind, RetryAfter: 2 * time.Second}}})
			cl := oaiClient(url, option.WithMaxRetries(0))
			var err error
			if stream {
				if c.kind == FaultErrorEvent {
					continue // a stream's error event is TestResponsesStreamFaults'
				}
				s := cl.Responses.NewStreaming(context.Background(), respParams("hi"))
				for s.Next() {
				}
				err = s.Err()
				_ = s.Close()
			} else {
				_, err = cl.Responses.New(context.Background(), respParams("hi"))
			}
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("%s stream %v: %T %v", c.kind, stream, err, err)
			}
			if apiErr.StatusCode != c.status || apiErr.Type != c.typ || apiErr.Code != c.code || apiErr.Message == "" {
				t.Errorf("%s: status %d type %q code %q message %q", c.kind, apiErr.StatusCode, apiErr.Type, apiErr.Code, apiErr.Message)
			}
			if c.kind == FaultRateLimit && (apiErr.Response.Header.Get("retry-after") != "2" || apiErr.Response.Header.Get("retry-after-ms") != "2000") {
				t.Errorf("retry headers: %v", apiErr.Response.Header)
			}
		}
	}
}

// TestResponsesSDKRetriesAfterOne429: the SDK's own retry honours
// retry-after and the second attempt is answered.
func TestResponsesSDKRetriesAfterOne429(t *testing.T) {
	t.Parallel()
	srv, url := srvStart(t, Options{Faults: map[int]Fault{1: {Kind: FaultRateLimit, RetryAfter: time.Millisecond}}})
	cl := oaiClient(url, option.WithMaxRetries(1))
	res, err := cl.Responses.New(context.Background(), respParams("hi"))
	if err != nil || res.Status != "completed" || len(srv.Requests()) != 2 {
		t.Fatalf("%v, %d requests", err, len(srv.Requests()))
	}
}

func TestResponsesStreamFaults(t *testing.T) {
	t.Parallel()
	t.Run("error event", func(t *testing.T) {
		t.Parallel()
		_, url := srvStart(t, Options{Responder: longReply, Faults: map[int]Fault{1: {Kind: FaultErrorEvent, AfterBytes: 900}}})
		cl := oaiClient(url, option.WithMaxRetries(0))
		s := cl.Responses.NewStreaming(context.Background(), respParams("hi"))
		var types []string
		var last string
		for s.Next() {
			ev := s.Current()
			if int(ev.SequenceNumber) != len(types) {
				t.Fatalf("event %s numbered %d after %d", ev.Type, ev.SequenceNumber, len(types))
			}
			types = append(types, ev.Type)
			last = ev.RawJSON()
		}
		_ = s.Close()
		if s.Err() != nil || len(types) < 3 || types[len(types)-1] != "response.failed" {
			t.Fatalf("%v: events %v", s.Err(), types)
		}
		failed := srvJSON(t, []byte(last))
		if srvDig(failed, "response", "status") != "failed" || srvDig(failed, "response", "error", "code") != "server_error" {
			t.Errorf("response.failed: %s", last)
		}
	})
	t.Run("cut", func(t *testing.T) {
		t.Parallel()
		_, url := srvStart(t, Options{Responder: longReply, Faults: map[int]Fault{1: {Kind: FaultCutStream, AfterBytes: 1000}, 2: {Kind: FaultCutStream, AfterBytes: 100}}})
		cl := oaiClient(url, option.WithMaxRetries(0))
		s := cl.Responses.NewStreaming(context.Background(), respParams("hi"))
		for s.Next() {
			if s.Current().Type == "response.completed" {
				t.Fatal("a cut stream completed")
			}
		}
		if s.Err() == nil {
			t.Fatal("a cut stream ended without an error")
		}
		_ = s.Close()
		if _, err := cl.Responses.New(context.Background(), respParams("hi")); err == nil {
			t.Fatal("a cut body decoded")
		}
	})
	t.Run("malformed", func(t *testing.T) {
		t.Parallel()
		_, url := srvStart(t, Options{Responder: longReply, Faults: map[int]Fault{1: {Kind: FaultMalformedJSON, AfterBytes: 400}, 2: {Kind: FaultMalformedJSON}}})
		cl := oaiClient(url, option.WithMaxRetries(0))
		s := cl.Responses.NewStreaming(context.Background(), respParams("hi"))
		for s.Next() {
		}
		if s.Err() == nil {
			t.Fatal("a malformed frame decoded")
		}
		_ = s.Close()
		if _, err := cl.Responses.New(context.Background(), respParams("hi")); err == nil {
			t.Fatal("a malformed body decoded")
		}
	})
}

func TestResponsesSlowFirstByteWaitsOnTheClock(t *testing.T) {
	t.Parallel()
	fc := clock.NewFake(fakeClockStart)
	_, url := srvStart(t, Options{Clock: fc, Faults: map[int]Fault{1: {Kind: FaultSlowFirstByte, Delay: 30 * time.Second}}})
	done := make(chan int, 1)
	go func() {
		res, err := http.Post(url+"/v1/responses", "application/json", strings.NewReader(respPlainBody))
		if err != nil {
			done <- -1
			return
		}
		res.Body.Close()
		done <- res.StatusCode
	}()
	waitTimers(t, fc, 1)
	fc.Advance(29 * time.Second)
	select {
	case s := <-done:
		t.Fatalf("answered (%d) before the delay passed", s)
	default:
	}
	fc.Advance(time.Second)
	if s := <-done; s != 200 {
		t.Fatalf("status %d", s)
	}
}

// TestResponsesLatencyFirstBytePlusPerToken: a response takes its first
// byte delay plus its output tokens' time, streamed or not, reasoning
// included.
func TestResponsesLatencyFirstBytePlusPerToken(t *testing.T) {
	t.Parallel()
	content := []llm.Block{llm.Opaque("thinking", thinkingBlock("think first")), llm.Text(strings.Repeat("token ", 20)), llm.ToolUse("", "t", json.RawMessage(`{"path":"x/y/z.go"}`))}
	wantOut := llm.EstimateOutput(content)
	for _, body := range []string{respStreamBody, respPlainBody, `{"model":"m","input":"hi","stream":true,"reasoning":{"summary":"auto"}}`} {
		fc := clock.NewFake(fakeClockStart)
		_, url := srvStart(t, Options{Clock: fc, FirstByte: 2 * time.Second, PerToken: 10 * time.Millisecond, MaxDelta: 3, Responder: replyWith(content...)})
		done := make(chan struct{})
		var got []byte
		var err error
		go func() {
			defer close(done)
			_, got, err = rawRead(t, url, "/v1/responses", body)
		}()
		moved := driveClock(t, fc, 10*time.Millisecond, done)
		if err != nil {
			t.Fatal(err)
		}
		if want := 2*time.Second + time.Duration(wantOut)*10*time.Millisecond; moved != want {
			t.Errorf("%s: the clock moved %v, want %v (%d output tokens)", body, moved, want, wantOut)
		}
		if !json.Valid(got) && !bytes.Contains(got, []byte("event: response.completed")) {
			t.Errorf("%s: incomplete body: %s", body, got)
		}
	}
}
