package fake

import (
	"regexp"
	"strings"

	"github.com/deputy-run/deputy/llm"
)

// matcher is a rule's compiled match conditions. A zero matcher matches
// every request.
type matcher struct {
	system, lastUser, toolResult, model textMatch
	// toolError: 0 no condition, 1 the last user message must hold an
	// error tool_result, -1 it must not.
	toolError int8
	// turnLo..turnHi is the turn range; 0 means unbounded on that side.
	turnLo, turnHi int
	tools          []string
}

// textMatch is a compiled regexp condition. A pattern that is a plain
// literal is matched with strings.Contains, which is what the regexp would do
// and several times cheaper.
type textMatch struct {
	set     bool
	literal string
	isLit   bool
	re      *regexp.Regexp
}

func compileTextMatch(pattern string) (textMatch, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return textMatch{}, err
	}
	// The substring shortcut only for a pattern that is its literal: Go
	// calls ^small$ a complete literal too, and a substring test would let
	// "not-small-at-all" match it.
	if lit, complete := re.LiteralPrefix(); complete && regexp.QuoteMeta(lit) == pattern {
		return textMatch{set: true, literal: lit, isLit: true}, nil
	}
	return textMatch{set: true, re: re}, nil
}

func (m *textMatch) match(s string) bool {
	if m.isLit {
		return strings.Contains(s, m.literal)
	}
	return m.re.MatchString(s)
}

// reqState is what answering one request learns about it, computed at most
// once: the turn, where the last user message is, the hash of the task for
// tool-use IDs, and the template data.
type reqState struct {
	req      *llm.Request
	info     RequestInfo
	seed     int64
	turn     int
	lastUser int // index in req.Messages, -1 when there is none
	idHash   uint64
	hashed   bool
	data     *TemplateData
}

func newReqState(req *llm.Request, info RequestInfo, seed int64) reqState {
	st := reqState{req: req, info: info, seed: seed, turn: 1, lastUser: -1}
	for i := range req.Messages {
		switch req.Messages[i].Role {
		case llm.Assistant:
			st.turn++
		case llm.User:
			st.lastUser = i
		}
	}
	return st
}

// lastUserMsg returns the last user message, or nil.
func (st *reqState) lastUserMsg() *llm.Message {
	if st.lastUser < 0 {
		return nil
	}
	return &st.req.Messages[st.lastUser]
}

func (m *matcher) matches(st *reqState) bool {
	if m.turnLo > 0 && st.turn < m.turnLo {
		return false
	}
	if m.turnHi > 0 && st.turn > m.turnHi {
		return false
	}
	for _, name := range m.tools {
		if !offers(st.req, name) {
			return false
		}
	}
	if m.model.set && !m.model.match(st.req.Model) {
		return false
	}
	if m.system.set && !m.system.match(st.req.System) {
		return false
	}
	if m.toolError != 0 {
		hasErr := false
		if msg := st.lastUserMsg(); msg != nil {
			for i := range msg.Content {
				b := &msg.Content[i]
				if b.Type == llm.TypeToolResult && b.IsError {
					hasErr = true
					break
				}
			}
		}
		if hasErr != (m.toolError > 0) {
			return false
		}
	}
	if m.toolResult.set {
		found := false
		if msg := st.lastUserMsg(); msg != nil {
			for i := range msg.Content {
				b := &msg.Content[i]
				if b.Type == llm.TypeToolResult && m.toolResult.match(b.Text) {
					found = true
					break
				}
			}
		}
		if !found {
			return false
		}
	}
	if m.lastUser.set {
		var text string
		if msg := st.lastUserMsg(); msg != nil {
			text = msg.Text()
		}
		if !m.lastUser.match(text) {
			return false
		}
	}
	return true
}

func offers(req *llm.Request, name string) bool {
	for i := range req.Tools {
		if req.Tools[i].Name == name {
			return true
		}
	}
	return false
}

// templateData returns the data templates see, with I and N set for one
// tool call of a repeat. The request-derived part is built once per request.
func (st *reqState) templateData(i, n int) *TemplateData {
	if st.data == nil {
		d := &TemplateData{Turn: st.turn, Model: st.req.Model, req: st.req}
		for k := range st.req.Messages {
			if st.req.Messages[k].Role == llm.User {
				d.Task = st.req.Messages[k].Text()
				break
			}
		}
		if msg := st.lastUserMsg(); msg != nil {
			d.LastUser = msg.Text()
			for k := range msg.Content {
				if msg.Content[k].Type == llm.TypeToolResult {
					d.ToolResults = append(d.ToolResults, msg.Content[k].Text)
				}
			}
		}
		st.data = d
	}
	// Rendering within one request is sequential, so the one value is
	// updated in place for each call of a repeat.
	st.data.I, st.data.N = i, n
	return st.data
}

const idAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// toolID returns the ID of the tool_use at content index block. It is a
// hash of the seed, the task, the turn, the transcript length and the block
// index: the same conversation gets the same IDs on every run and on a
// retry, whatever order concurrent conversations reach the fake in, and two
// conversations with different tasks do not share IDs.
func (st *reqState) toolID(block int) string {
	if !st.hashed {
		const prime = 1099511628211
		h := uint64(14695981039346656037)
		for k := range st.req.Messages {
			if st.req.Messages[k].Role != llm.User {
				continue
			}
			for _, b := range st.req.Messages[k].Content {
				if b.Type != llm.TypeText {
					continue
				}
				for j := 0; j < len(b.Text); j++ {
					h = (h ^ uint64(b.Text[j])) * prime
				}
			}
			break
		}
		h = mix64(h ^ uint64(st.seed))
		h = mix64(h ^ uint64(st.turn))
		st.idHash = mix64(h ^ uint64(len(st.req.Messages)))
		st.hashed = true
	}
	prefix := "toolu_"
	if st.info.Provider == OpenAI {
		prefix = "call_"
	}
	var buf [32]byte
	n := copy(buf[:], prefix)
	n += putID(buf[n:], st.idHash^uint64(block)<<40)
	return string(buf[:n])
}

// putID writes 24 base-62 characters derived from x into buf and returns
// 24: three hash rounds of eight characters each (62⁸ < 2⁴⁸, so the digits
// of a 64-bit round are close to uniform).
func putID(buf []byte, x uint64) int {
	n := 0
	for range 3 {
		x = mix64(x)
		y := x
		for range 8 {
			buf[n] = idAlphabet[y%62]
			y /= 62
			n++
		}
	}
	return n
}
