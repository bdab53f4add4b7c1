package permission

import (
	"fmt"
	"strings"
)

// bashPattern is a Bash rule's specifier.
type bashPattern struct {
	prefix   bool     // `prefix:*`: text is the prefix
	text     string   // exact command, or prefix
	parts    []string // wildcard form: the literal pieces between '*'s
	optional string   // wildcard form with one trailing " *": the command without it
	compound bool     // the pattern itself has shell operators, so it is tried on whole lines
}

func parseBash(spec string) (bashPattern, error) {
	b, err := parseBashForm(normalize(spec))
	b.compound = strings.ContainsAny(spec, "&|;\n`") || strings.Contains(spec, "$(")
	return b, err
}

func parseBashForm(spec string) (bashPattern, error) {
	if p, ok := strings.CutSuffix(spec, ":*"); ok {
		if strings.Contains(p, "*") {
			return bashPattern{}, fmt.Errorf("`:*` prefix %q may not contain another '*'", p)
		}
		return bashPattern{prefix: true, text: strings.TrimSpace(p)}, nil
	}
	if strings.Contains(spec, ":*") {
		return bashPattern{}, fmt.Errorf("`:*` may only end the pattern, in %q", spec)
	}
	if !strings.Contains(spec, "*") {
		return bashPattern{text: spec}, nil
	}
	b := bashPattern{parts: strings.Split(spec, "*")}
	if strings.Count(spec, "*") == 1 && strings.HasSuffix(spec, " *") {
		b.optional = strings.TrimSuffix(spec, " *")
	}
	return b, nil
}

// match reports whether one simple command (normalized) matches.
func (b *bashPattern) match(cmd string) bool {
	switch {
	case b.prefix:
		return b.text == "" || cmd == b.text ||
			len(cmd) > len(b.text) && strings.HasPrefix(cmd, b.text) && cmd[len(b.text)] == ' '
	case b.parts == nil:
		return cmd == b.text
	case b.optional != "" && cmd == b.optional:
		return true
	}
	return wildMatch(b.parts, cmd)
}

// wildMatch matches s against literal pieces separated by '*' wildcards.
// Greedy leftmost placement of the middle pieces is enough, since '*'
// matches anything.
func wildMatch(parts []string, s string) bool {
	first, last := parts[0], parts[len(parts)-1]
	if !strings.HasPrefix(s, first) {
		return false
	}
	s = s[len(first):]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return strings.HasSuffix(s, last)
}

// normalize collapses runs of white space so that rules and commands
// compare the same however they were spaced.
func normalize(s string) string {
	// Most commands are spaced already: check before building a new string.
	clean := s != "" && s[0] != ' ' && s[len(s)-1] != ' '
	for i := 0; clean && i < len(s); i++ {
		switch c := s[i]; {
		case c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' || c >= 0x80:
			clean = false
		case c == ' ' && s[i-1] == ' ':
			clean = false
		}
	}
	if clean {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// splitCommand splits a shell command line into its simple commands: at
// &&, ||, ;, |, & and newlines outside quotes, and with the text of every
// command substitution ($(...), `...`, <(...), >(...)) added as commands of
// its own, since they run too. ok is false when the line could not be read
// to its end (an unclosed quote or substitution); the caller then lets no
// prefix rule allow it.
func splitCommand(line string) (cmds []string, ok bool) {
	sc := splitter{src: line}
	ok = sc.run(0, &cmds)
	for i, c := range cmds {
		cmds[i] = normalize(strings.Trim(c, " \t(){}"))
	}
	out := cmds[:0]
	for _, c := range cmds {
		if c != "" {
			out = append(out, c)
		}
	}
	return out, ok
}

type splitter struct {
	src string
	pos int
}

// run reads commands until the end of input or, when close is not 0, until
// that unquoted closing character. It reports whether it ended where it
// should.
func (s *splitter) run(close byte, cmds *[]string) bool {
	start := s.pos
	var quote byte
	for s.pos < len(s.src) {
		c := s.src[s.pos]
		switch {
		case c == '\\' && quote != '\'':
			s.pos += 2
			continue
		case quote == '\'':
			if c == '\'' {
				quote = 0
			}
		case c == '`':
			// Backticks do not nest without escapes: read to the next one.
			end := strings.IndexByte(s.src[s.pos+1:], '`')
			if end < 0 {
				*cmds = append(*cmds, s.src[start:])
				return false
			}
			inner := s.src[s.pos+1 : s.pos+1+end]
			sub, _ := splitCommand(inner)
			*cmds = append(*cmds, sub...)
			s.pos += end + 2
			continue
		case (c == '$' || c == '<' || c == '>') && s.peek(1) == '(':
			s.pos += 2
			var sub []string
			ok := s.run(')', &sub)
			*cmds = append(*cmds, sub...)
			if !ok {
				// Keep what was read, for deny rules to look at.
				*cmds = append(*cmds, s.src[start:])
				return false
			}
			continue
		case quote == '"':
			if c == '"' {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case close != 0 && c == close:
			*cmds = append(*cmds, s.src[start:s.pos])
			s.pos++
			return true
		case c == '(' && close == ')':
			// A nested group inside a substitution: read it whole.
			s.pos++
			var sub []string
			ok := s.run(')', &sub)
			*cmds = append(*cmds, sub...)
			if !ok {
				// Keep what was read, for deny rules to look at.
				*cmds = append(*cmds, s.src[start:])
				return false
			}
			continue
		case c == '&' && (s.pos > 0 && (s.src[s.pos-1] == '>' || s.src[s.pos-1] == '<') || s.peek(1) == '>'):
			// 2>&1, <&3, &>file: redirections, not a background operator.
		case c == ';' || c == '\n' || c == '&' || c == '|':
			*cmds = append(*cmds, s.src[start:s.pos])
			s.pos++
			if n := s.peek(0); n == c || c == '|' && n == '&' {
				s.pos++ // &&, ||, ;;, |&
			}
			start = s.pos
			continue
		}
		s.pos++
	}
	*cmds = append(*cmds, s.src[start:min(s.pos, len(s.src))])
	return quote == 0 && close == 0
}

func (s *splitter) peek(n int) byte {
	if s.pos+n < len(s.src) {
		return s.src[s.pos+n]
	}
	return 0
}

// stripAssignments drops leading VAR=value words, so that a deny rule for
// `rm` also catches `X=1 rm -rf /`. It is used for deny and ask only: an
// allow rule for `npm test` must not allow `NODE_OPTIONS=... npm test`.
func stripAssignments(cmd string) string {
	for {
		word, rest, _ := strings.Cut(cmd, " ")
		eq := strings.IndexByte(word, '=')
		if eq <= 0 || !isName(word[:eq]) {
			return cmd
		}
		cmd = rest
	}
}

func isName(s string) bool {
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}
