package fake

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/deputy-run/deputy/llm"
)

// Opaque thinking tokens: a thinking block's signature and a redacted
// thinking block's data on the Messages wire, a reasoning item's
// encrypted_content on the Responses wire. The real APIs' tokens carry the
// thinking itself, encrypted, and are refused when a client sends back one
// the API did not make or a block whose text it changed; the fake's carry
// the text in the clear with a MAC, which is enough to tell the same
// things. Each kind has its own key, so a token of one kind is not good as
// another (a signature sent as redacted data is refused, as the API
// refuses it). The keys are fixed, so a token from one fake server is good
// on another, as a scenario replayed on a fresh server expects.

// sealer makes and opens one kind of token.
type sealer struct {
	// prefix starts every token, as the real ones start alike (Fernet's
	// "gAAAAA").
	prefix string
	key    []byte
	enc    *base64.Encoding
}

// sealMACLen is how much of the HMAC a token keeps.
const sealMACLen = 16

var (
	// thinkingSeal makes signatures: standard base64, padded, as the
	// Messages API's are ("EqQBCkYI…==").
	thinkingSeal = sealer{key: []byte("deputy-fake-thinking-v2"), enc: base64.StdEncoding}
	// redactedSeal makes redacted_thinking data.
	redactedSeal = sealer{key: []byte("deputy-fake-redacted-thinking-v1"), enc: base64.StdEncoding}
)

// seal makes the token that carries text.
func (s sealer) seal(text string) string {
	payload := append(s.mac([]byte(text)), text...)
	return s.prefix + s.enc.EncodeToString(payload)
}

// open returns the text a token carries, and whether the token is one
// seal made, byte for byte.
func (s sealer) open(token string) (string, bool) {
	rest, ok := strings.CutPrefix(token, s.prefix)
	if !ok {
		return "", false
	}
	payload, err := s.enc.DecodeString(rest)
	if err != nil || len(payload) < sealMACLen {
		return "", false
	}
	text := payload[sealMACLen:]
	if !hmac.Equal(s.mac(text), payload[:sealMACLen]) {
		return "", false
	}
	// Decoding is lenient about some spellings of one payload (newlines
	// in std base64); only the exact token seal makes is the API's.
	if s.prefix+s.enc.EncodeToString(payload) != token {
		return "", false
	}
	return string(text), true
}

func (s sealer) mac(text []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write(text)
	return m.Sum(nil)[:sealMACLen]
}

// RedactedThinkingData is the data of a redacted_thinking block the fake
// stands behind: the fake server accepts a redacted_thinking block sent
// back only with data made here, as the real API accepts only data it
// encrypted.
func RedactedThinkingData(thinking string) string { return redactedSeal.seal(thinking) }

// anthThinkingWire is a thinking or redacted_thinking block
// (BetaThinkingBlockParam, BetaRedactedThinkingBlockParam in
// anthropic-sdk-go v2.15.0: signature and thinking, or data, required).
type anthThinkingWire struct {
	Type      string  `json:"type"`
	Thinking  *string `json:"thinking"`
	Signature *string `json:"signature"`
}

type anthRedactedWire struct {
	Type string  `json:"type"`
	Data *string `json:"data"`
}

// anthThinkingBlockFields checks a thinking or redacted_thinking block's fields
// strictly under its tag (messages.1.content.0.thinking.signature: Field
// required), as the other blocks are checked.
func anthThinkingBlockFields(raw json.RawMessage, path, typ string) *wireError {
	at := path + "." + typ
	if typ == "redacted_thinking" {
		var r anthRedactedWire
		if werr := anthDecodeAt(raw, at, &r); werr != nil {
			return werr
		}
		if r.Data == nil {
			return invalid("%s.data: Field required", at)
		}
		return nil
	}
	var t anthThinkingWire
	if werr := anthDecodeAt(raw, at, &t); werr != nil {
		return werr
	}
	switch {
	case t.Signature == nil:
		return invalid("%s.signature: Field required", at)
	case t.Thinking == nil:
		return invalid("%s.thinking: Field required", at)
	}
	return nil
}

// anthThinkingSealed refuses a thinking block the fake did not sign, or
// whose text is neither the signed text nor empty (what display "omitted"
// sends), and a redacted_thinking block whose data the fake did not make.
// The wording is the API's: "messages.1.content.0: Invalid `signature` in
// `thinking` block" (quoted in anthropics/claude-code issue 10627 and
// anthropics/anthropic-sdk-python issue 1598, where a maintainer says it is
// given for a block that "differs in any way from what was originally
// returned"), "Invalid `data` in `redacted_thinking` block" (quoted in
// microsoft/vscode pull request 320196). Its fields were checked when the
// block was decoded (anthThinkingBlockFields).
func anthThinkingSealed(b *llm.Block, path string) *wireError {
	switch b.Type {
	case "thinking":
		var t anthThinkingWire
		if json.Unmarshal(b.Raw, &t) != nil || t.Signature == nil || t.Thinking == nil {
			return invalid("%s: Invalid `signature` in `thinking` block", path)
		}
		text, ok := thinkingSeal.open(*t.Signature)
		if !ok || (*t.Thinking != "" && *t.Thinking != text) {
			return invalid("%s: Invalid `signature` in `thinking` block", path)
		}
	case "redacted_thinking":
		var r anthRedactedWire
		if json.Unmarshal(b.Raw, &r) != nil || r.Data == nil {
			return invalid("%s: Invalid `data` in `redacted_thinking` block", path)
		}
		if _, ok := redactedSeal.open(*r.Data); !ok {
			return invalid("%s: Invalid `data` in `redacted_thinking` block", path)
		}
	}
	return nil
}

// thinkingCheck checks every thinking and redacted_thinking block of
// the decoded messages, under its wire path.
func (c *anthConversation) thinkingCheck(msgs []llm.Message) *wireError {
	for k := range msgs {
		for j := range msgs[k].Content {
			b := &msgs[k].Content[j]
			if b.Type != "thinking" && b.Type != "redacted_thinking" {
				continue
			}
			if werr := anthThinkingSealed(b, fmt.Sprintf("messages.%d.content.%d", c.wireIndex[k], j)); werr != nil {
				return werr
			}
		}
	}
	return nil
}
