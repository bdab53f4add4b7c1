package fake

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
)

// Reasoning items' encrypted_content. The real API's is an opaque token
// (Fernet-style, "gAAAAAB…") that only the API can read, which a client
// must send back unchanged; a changed one is refused as "could not be
// verified". The fake's token carries the scenario's thinking text with a
// MAC, so it too detects a client that alters it. The key is fixed, like
// ThinkingSignature's, so a token from one fake server is good on another,
// as a scenario replayed on a fresh server expects.

// reasoningPrefix starts every token, as Fernet tokens start "gAAAAA".
const reasoningPrefix = "gAAAAAB"

var reasoningKey = []byte("deputy-fake-reasoning-v1")

// reasoningMACLen is how much of the HMAC the token keeps.
const reasoningMACLen = 16

// sealReasoning makes the encrypted_content of a reasoning item whose
// thinking is text.
func sealReasoning(text string) string {
	m := hmac.New(sha256.New, reasoningKey)
	m.Write([]byte(text))
	payload := append(m.Sum(nil)[:reasoningMACLen], text...)
	return reasoningPrefix + base64.RawURLEncoding.EncodeToString(payload)
}

// openReasoning returns the thinking a token carries, and whether the
// token is one sealReasoning made, byte for byte.
func openReasoning(token string) (string, bool) {
	rest, ok := strings.CutPrefix(token, reasoningPrefix)
	if !ok {
		return "", false
	}
	payload, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || len(payload) < reasoningMACLen {
		return "", false
	}
	m := hmac.New(sha256.New, reasoningKey)
	m.Write(payload[reasoningMACLen:])
	if !hmac.Equal(m.Sum(nil)[:reasoningMACLen], payload[:reasoningMACLen]) {
		return "", false
	}
	return string(payload[reasoningMACLen:]), true
}

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
