package providertest

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/llm/fake"
)

// Respond adapts a function to fake.Responder.
type Respond func(req *llm.Request, info fake.RequestInfo) fake.Reply

// Respond calls f.
func (f Respond) Respond(req *llm.Request, info fake.RequestInfo) fake.Reply { return f(req, info) }

// StartServer serves a fake model API over loopback HTTP for the test's
// lifetime and returns it with its root URL.
func StartServer(t testing.TB, opts fake.Options) (*fake.Server, string) {
	t.Helper()
	s := fake.NewServer(opts)
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return s, hs.URL
}

// Attempts collects the attempts reported through a context.
type Attempts struct {
	mu  sync.Mutex
	got []llm.Attempt
	// OnAttempt, when set, runs for each attempt (before it is stored).
	OnAttempt func(llm.Attempt)
}

// Context returns ctx with the collector as attempt observer.
func (a *Attempts) Context(ctx context.Context) context.Context {
	return llm.WithAttemptObserver(ctx, func(at llm.Attempt) {
		if a.OnAttempt != nil {
			a.OnAttempt(at)
		}
		a.mu.Lock()
		a.got = append(a.got, at)
		a.mu.Unlock()
	})
}

// All returns the attempts so far.
func (a *Attempts) All() []llm.Attempt {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]llm.Attempt(nil), a.got...)
}

// Reset forgets the attempts so far.
func (a *Attempts) Reset() {
	a.mu.Lock()
	a.got = nil
	a.mu.Unlock()
}

// streamed is a response rebuilt from deltas, as a consumer that honours
// Discarded attempts would rebuild it.
type streamed struct {
	blocks   map[int]*streamedBlock
	deltas   int
	restarts int
}

type streamedBlock struct {
	typ, id, name, text string
}

func (s *streamed) add(d llm.Delta) {
	if s.blocks == nil {
		s.blocks = map[int]*streamedBlock{}
	}
	s.deltas++
	b := s.blocks[d.Index]
	if b == nil {
		b = &streamedBlock{typ: d.Type}
		s.blocks[d.Index] = b
	}
	if d.ID != "" {
		b.id = d.ID
	}
	if d.Name != "" {
		b.name = d.Name
	}
	b.text += d.Text
}

// discard drops everything streamed so far: a retry restarts the response.
func (s *streamed) discard() {
	s.blocks = nil
	s.restarts++
}

// check compares the rebuilt stream with the final response.
func (s *streamed) check(t testing.TB, r *llm.Response) {
	t.Helper()
	if len(s.blocks) == 0 && len(r.Content) > 0 {
		t.Errorf("no deltas streamed for %d blocks", len(r.Content))
		return
	}
	for i, b := range r.Content {
		sb := s.blocks[i]
		if sb == nil {
			if b.Type == llm.TypeText || b.Type == llm.TypeToolUse {
				t.Errorf("block %d (%s): nothing streamed", i, b.Type)
			}
			continue
		}
		if sb.typ != b.Type {
			t.Errorf("block %d: streamed type %q, response %q", i, sb.typ, b.Type)
		}
		switch b.Type {
		case llm.TypeText:
			if sb.text != b.Text {
				t.Errorf("block %d: streamed text %q, response %q", i, sb.text, b.Text)
			}
		case llm.TypeToolUse:
			if sb.id != b.ID || sb.name != b.Name {
				t.Errorf("block %d: streamed id/name %q/%q, response %q/%q", i, sb.id, sb.name, b.ID, b.Name)
			}
			if args := b.Arguments(); sb.text != args && !(sb.text == "" && args == "{}") {
				t.Errorf("block %d: streamed input %q, response %q", i, sb.text, args)
			}
		case "thinking":
			var th struct{ Thinking string }
			if err := json.Unmarshal(b.Raw, &th); err != nil || sb.text != th.Thinking {
				t.Errorf("block %d: streamed thinking %q, response %s (%v)", i, sb.text, b.Raw, err)
			}
		}
	}
	for i := range s.blocks {
		if i < 0 || i >= len(r.Content) {
			t.Errorf("delta for block %d, response has %d blocks", i, len(r.Content))
		}
	}
}
