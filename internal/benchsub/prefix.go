package benchsub

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
)

// cacheControl matches an Anthropic cache_control marker inside a JSON
// object, with the comma that joins it to its neighbours. The markers move
// with every request by design (they sit on the newest messages) and are
// not part of the cached content, so the prefix measure ignores them.
var cacheControl = regexp.MustCompile(`,"cache_control":\{[^{}]*\}|"cache_control":\{[^{}]*\},?`)

// Prefix is how much of a request body is a prefix of another's, in the
// order the providers cache a prompt.
type Prefix struct {
	// Matching is the bytes of the leading elements the two requests
	// share; Total is the bytes of all of the request's elements.
	Matching, Total int
	// Elements and MatchingElements count the same, in elements.
	Elements, MatchingElements int
}

// Share is Matching / Total.
func (p Prefix) Share() float64 { return ratio(float64(p.Matching), float64(p.Total)) }

// PrefixOf measures how much of req (a raw request body on wire) is a byte
// prefix of prev: both are cut into the elements a prompt cache keys on, in
// cache order (the model; the tool definitions; the system prompt's blocks;
// then every message's content blocks on the Anthropic wire, every message
// on the OpenAI wire, where the system prompt is the first message), with
// cache_control markers removed, and compared element by element from the
// start; the first element that differs ends the shared prefix. A different
// model shares nothing, since caches are per model.
func PrefixOf(wire string, prev, req []byte) (Prefix, error) {
	pe, err := cacheElements(wire, prev)
	if err != nil {
		return Prefix{}, fmt.Errorf("previous request: %w", err)
	}
	re, err := cacheElements(wire, req)
	if err != nil {
		return Prefix{}, fmt.Errorf("request: %w", err)
	}
	var p Prefix
	p.Elements = len(re)
	same := true
	for i, e := range re {
		p.Total += len(e)
		if same && i < len(pe) && bytes.Equal(pe[i], e) {
			p.Matching += len(e)
			p.MatchingElements++
		} else {
			same = false
		}
	}
	return p, nil
}

// cacheElements cuts a request body into its cache-order elements.
func cacheElements(wire string, body []byte) ([][]byte, error) {
	var top struct {
		Model    json.RawMessage   `json:"model"`
		System   json.RawMessage   `json:"system"`
		Tools    []json.RawMessage `json:"tools"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, fmt.Errorf("decode body: %w", err)
	}
	out := [][]byte{top.Model}
	for _, t := range top.Tools {
		out = append(out, clean(t))
	}
	switch wire {
	case "anthropic":
		sys, err := blocks(top.System)
		if err != nil {
			return nil, fmt.Errorf("system: %w", err)
		}
		out = append(out, sys...)
		for i, m := range top.Messages {
			bs, err := blocks(m.Content)
			if err != nil {
				return nil, fmt.Errorf("message %d: %w", i, err)
			}
			// The role is part of each element: the same block under
			// another role is another prompt.
			for _, b := range bs {
				out = append(out, append([]byte(m.Role+":"), b...))
			}
		}
	case "openai":
		// A message is one element, its role and tool calls included:
		// re-decode the messages as raw values to keep every field.
		var msgs struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(body, &msgs); err != nil {
			return nil, fmt.Errorf("decode messages: %w", err)
		}
		for _, m := range msgs.Messages {
			out = append(out, clean(m))
		}
	default:
		return nil, fmt.Errorf("unknown wire %q", wire)
	}
	return out, nil
}

// blocks splits Anthropic content (a string or an array of blocks) into
// elements.
func blocks(raw json.RawMessage) ([][]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		if len(raw) == 0 {
			return nil, nil
		}
		return [][]byte{raw}, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, err
	}
	out := make([][]byte, len(list))
	for i, b := range list {
		out[i] = clean(b)
	}
	return out, nil
}

func clean(b []byte) []byte { return cacheControl.ReplaceAll(b, nil) }
