package fake

import (
	"unicode/utf8"
)

// jsonTmpl is a tool input compiled at load time: compact JSON with the keys
// in the order the scenario wrote them. Most inputs have no template and are
// a fixed byte slice shared by every reply; the others are literal chunks
// with templated strings between them.
type jsonTmpl struct {
	// static is the whole input when it has no template. staticStr is the
	// same bytes as a string, so streaming it costs no conversion.
	static    []byte
	staticStr string
	parts     []jsonPart
	size      int // bytes of the literal chunks, to size the render buffer
}

// jsonPart is either a literal chunk of JSON or a string template whose
// output is quoted into the JSON.
type jsonPart struct {
	lit []byte
	t   *tmpl
}

// jsonBuilder accumulates a jsonTmpl while the YAML is walked.
type jsonBuilder struct {
	buf   []byte
	parts []jsonPart
}

func (b *jsonBuilder) literal(s string) { b.buf = append(b.buf, s...) }

func (b *jsonBuilder) str(t *tmpl) {
	if t.isStatic() {
		b.buf = appendJSONString(b.buf, t.static)
		return
	}
	b.flush()
	b.parts = append(b.parts, jsonPart{t: t})
}

func (b *jsonBuilder) flush() {
	if len(b.buf) > 0 {
		b.parts = append(b.parts, jsonPart{lit: b.buf})
		b.buf = nil
	}
}

func (b *jsonBuilder) done() jsonTmpl {
	if len(b.parts) == 0 {
		// The full slice expression caps the shared bytes, so a caller
		// appending to a reply's Input copies instead of writing into them.
		s := b.buf[:len(b.buf):len(b.buf)]
		return jsonTmpl{static: s, staticStr: string(s)}
	}
	b.flush()
	j := jsonTmpl{parts: b.parts}
	for _, p := range j.parts {
		j.size += len(p.lit)
	}
	return j
}

// render returns the input for one tool call.
func (j *jsonTmpl) render(d *TemplateData) []byte {
	if j.static != nil {
		return j.static
	}
	out := make([]byte, 0, j.size+64)
	for _, p := range j.parts {
		if p.t == nil {
			out = append(out, p.lit...)
		} else {
			out = appendJSONString(out, p.t.render(d))
		}
	}
	return out
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string. It escapes what JSON requires
// (quote, backslash, control characters), replaces invalid UTF-8 with U+FFFD
// and, like encoding/json, escapes U+2028 and U+2029; it leaves <, > and &
// alone because the output is never embedded in HTML.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
