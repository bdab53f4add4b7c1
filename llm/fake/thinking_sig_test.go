package fake

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/llm"
)

// TestSealerOpensOnlyItsOwnTokens: each kind of token opens to the text it
// sealed, and no other token does: one changed anywhere, one of another
// kind, one re-spelled.
func TestSealerOpensOnlyItsOwnTokens(t *testing.T) {
	t.Parallel()
	sealers := map[string]sealer{"thinking": thinkingSeal, "redacted": redactedSeal, "reasoning": reasoningSeal}
	for _, text := range []string{"", "plan: <a> & \"b\"\n", strings.Repeat("ü", 300)} {
		for name, s := range sealers {
			tok := s.seal(text)
			if got, ok := s.open(tok); !ok || got != text {
				t.Errorf("%s: open(seal(%q)) = %q, %v", name, text, got, ok)
			}
			for i := range tok {
				b := []byte(tok)
				b[i] ^= 1
				if got, ok := s.open(string(b)); ok {
					t.Errorf("%s: token changed at byte %d opened to %q", name, i, got)
				}
			}
			if _, ok := s.open(tok[:len(tok)-4]); ok {
				t.Errorf("%s: truncated token opened", name)
			}
			if len(tok) > 10 {
				if _, ok := s.open(tok[:8] + "\n" + tok[8:]); ok {
					t.Errorf("%s: token with a newline opened", name)
				}
			}
			for other, o := range sealers {
				if other != name {
					if _, ok := o.open(tok); ok {
						t.Errorf("a %s token opened as %s", name, other)
					}
				}
			}
		}
	}
	if ThinkingSignature("a") == ThinkingSignature("b") || RedactedThinkingData("a") == ThinkingSignature("a") {
		t.Error("tokens of different texts or kinds are equal")
	}
}

// thinkingRequest is a Messages request whose assistant turn holds block,
// then a text, and a user message after it.
func thinkingRequest(block string) string {
	return `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"hi"},` +
		`{"role":"assistant","content":[` + block + `,{"type":"text","text":"ok"}]},` +
		`{"role":"user","content":"go on"}]}`
}

// thinkingJSON is a thinking block with these thinking and signature
// values.
func thinkingJSON(thinking, signature string) string {
	b, _ := json.Marshal(map[string]string{"type": "thinking", "thinking": thinking, "signature": signature})
	return string(b)
}

// TestThinkingBlocksSentBack: a thinking block is accepted back only as the
// fake signed it, or with its text emptied (display "omitted"); anything
// else is refused as the Messages API refuses it, at the block's path.
func TestThinkingBlocksSentBack(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{Responder: replyWith(llm.Text("fine"))})
	const text = "The user said hi; answer briefly."
	sig := ThinkingSignature(text)
	const badSig = "messages.1.content.0: Invalid `signature` in `thinking` block"
	const badData = "messages.1.content.0: Invalid `data` in `redacted_thinking` block"
	cases := []struct{ name, block, want string }{
		{"unchanged", thinkingJSON(text, sig), ""},
		{"text omitted", thinkingJSON("", sig), ""},
		{"text edited", thinkingJSON(text+" (edited)", sig), badSig},
		{"another block's text", thinkingJSON("Something else.", sig), badSig},
		{"hand-written signature", thinkingJSON(text, "sig-1"), badSig},
		{"empty signature", thinkingJSON("", ""), badSig},
		{"signature of another text", thinkingJSON(text, ThinkingSignature("Something else.")), badSig},
		{"reasoning token as signature", thinkingJSON(text, sealReasoning(text)), badSig},
		{"redacted data as signature", thinkingJSON(text, RedactedThinkingData(text)), badSig},
		{"no signature", `{"type":"thinking","thinking":"x"}`, "messages.1.content.0.thinking.signature: Field required"},
		{"no thinking", `{"type":"thinking","signature":"` + sig + `"}`, "messages.1.content.0.thinking.thinking: Field required"},
		{"signature not a string", `{"type":"thinking","thinking":"x","signature":7}`, "messages.1.content.0.thinking.signature: Input should be a valid string"},
		{"extra field", `{"type":"thinking","thinking":"","signature":"` + sig + `","cache_control":{"type":"ephemeral"}}`, "messages.1.content.0.thinking.cache_control: Extra inputs are not permitted"},
		{"redacted", `{"type":"redacted_thinking","data":"` + RedactedThinkingData(text) + `"}`, ""},
		{"redacted, hand-written data", `{"type":"redacted_thinking","data":"EmwKAhgBEgyRedactedData+/="}`, badData},
		{"redacted, a signature as data", `{"type":"redacted_thinking","data":"` + sig + `"}`, badData},
		{"redacted, no data", `{"type":"redacted_thinking"}`, "messages.1.content.0.redacted_thinking.data: Field required"},
		{"redacted, extra field", `{"type":"redacted_thinking","data":"x","signature":"y"}`, "messages.1.content.0.redacted_thinking.signature: Extra inputs are not permitted"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := srvPost(t, url, "/v1/messages", thinkingRequest(c.block), "anthropic-version", "2023-06-01")
			if c.want == "" {
				if r.status != http.StatusOK {
					t.Fatalf("status %d: %s", r.status, r.body)
				}
				return
			}
			m := srvJSON(t, r.body)
			if r.status != http.StatusBadRequest || srvDig(m, "error", "type") != "invalid_request_error" {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if msg := srvDig(m, "error", "message"); msg != c.want {
				t.Errorf("message:\n got %q\nwant %q", msg, c.want)
			}
		})
	}
}

// TestThinkingBlockPathInLaterMessages: the refusal names the wire index
// of the block, counting a mid-conversation system message, which is not
// among the Responder's messages.
func TestThinkingBlockPathInLaterMessages(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{Responder: replyWith(llm.Text("fine"))})
	good := thinkingJSON("first", ThinkingSignature("first"))
	body := `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"hi"},` +
		`{"role":"system","content":"be brief"},` +
		`{"role":"assistant","content":[` + good + `,{"type":"text","text":"ok"}]},` +
		`{"role":"user","content":"again"},` +
		`{"role":"assistant","content":[{"type":"text","text":"so"},` + thinkingJSON("second", "forged") + `]},` +
		`{"role":"user","content":"go on"}]}`
	r := srvPost(t, url, "/v1/messages", body, "anthropic-version", "2023-06-01")
	m := srvJSON(t, r.body)
	if want := "messages.4.content.1: Invalid `signature` in `thinking` block"; r.status != http.StatusBadRequest || srvDig(m, "error", "message") != want {
		t.Errorf("status %d, %s; want 400 %q", r.status, r.body, want)
	}
}

// TestThinkingRoundTripOverHTTP: the blocks the fake answers with, plain
// and with display "omitted", are accepted when sent back as received.
func TestThinkingRoundTripOverHTTP(t *testing.T) {
	t.Parallel()
	const text = "Think about <it> & answer."
	_, url := srvStart(t, Options{Responder: replyWith(llm.Opaque("thinking", thinkingBlock(text)), llm.Text("done"))})
	for _, thinking := range []string{`{"type":"enabled","budget_tokens":1024}`, `{"type":"adaptive","display":"omitted"}`} {
		first := `{"model":"m","max_tokens":2000,"thinking":` + thinking + `,"messages":[{"role":"user","content":"hi"}]}`
		r := srvPost(t, url, "/v1/messages", first, "anthropic-version", "2023-06-01")
		if r.status != http.StatusOK {
			t.Fatalf("%s: status %d: %s", thinking, r.status, r.body)
		}
		var out struct {
			Content []json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(r.body, &out); err != nil || len(out.Content) != 2 {
			t.Fatalf("%s: answer %s: %v", thinking, r.body, err)
		}
		var th anthThinkingWire
		if err := json.Unmarshal(out.Content[0], &th); err != nil || th.Signature == nil || th.Thinking == nil {
			t.Fatalf("%s: thinking block %s: %v", thinking, out.Content[0], err)
		}
		if omitted := strings.Contains(thinking, "omitted"); (*th.Thinking == "") != omitted {
			t.Errorf("%s: thinking %q", thinking, *th.Thinking)
		}
		asst, _ := json.Marshal(out.Content)
		next := `{"model":"m","max_tokens":2000,"thinking":` + thinking + `,"messages":[{"role":"user","content":"hi"},` +
			`{"role":"assistant","content":` + string(asst) + `},{"role":"user","content":"more"}]}`
		if r := srvPost(t, url, "/v1/messages", next, "anthropic-version", "2023-06-01"); r.status != http.StatusOK {
			t.Errorf("%s: sent back as received: status %d: %s", thinking, r.status, r.body)
		}
	}
}
