package fake

import (
	"encoding/base64"
	"encoding/json"
)

// Reasoning items' encrypted_content. The real API's is an opaque token
// (Fernet-style, "gAAAAAB…") that only the API can read, which a client
// must send back unchanged; a changed one is refused as "could not be
// verified". The fake's token carries the scenario's thinking text with a
// MAC (sealer, thinking_sig.go, which also makes ThinkingSignature), so it
// too detects a client that alters it.

// reasoningSeal makes the tokens; its prefix is the Fernet tokens' start.
var reasoningSeal = sealer{prefix: "gAAAAAB", key: []byte("deputy-fake-reasoning-v1"), enc: base64.RawURLEncoding}

// sealReasoning makes the encrypted_content of a reasoning item whose
// thinking is text.
func sealReasoning(text string) string { return reasoningSeal.seal(text) }

// openReasoning returns the thinking a token carries, and whether the
// token is one sealReasoning made, byte for byte.
func openReasoning(token string) (string, bool) { return reasoningSeal.open(token) }

// thinkingText reads the thinking text of a scenario's thinking block
// (Anthropic's shape, {"type":"thinking","thinking":…}).
func thinkingText(raw json.RawMessage) (string, bool) {
	var t struct {
		Type     string `json:"type"`
		Thinking string `json:"thinking"`
	}
	if json.Unmarshal(raw, &t) != nil || t.Type != "thinking" {
		return "", false
	}
	return t.Thinking, true
}
