package permission

import "strings"

// index groups a Set's rules by the deputy tool they cover, so a call
// looks only at the rules that can match it: of 100 rules, a read_file call
// walks the Read rules and a bash call the Bash rules. It is built once
// (NewSet, LoadSettings, Policy.Child) and only read afterwards, so a Set
// may decide calls from many goroutines at once.
//
// The index holds positions into the Set's own slices, not copies of the
// rules, and remembers which slices it was built over: a Set whose
// Allow, Ask or Deny was replaced or appended to since (the slice's start
// or length differs) is decided by walking every rule, as an unindexed
// Set literal is. Rules changed in place are not noticed; a Set's rules
// are not meant to be edited once it is built.
type index struct {
	allow, ask, deny []Rule             // the slices it was built over
	tools            map[string]*bucket // by deputy tool name
	mcp              map[string]*bucket // MCP rules, by server
}

// bucket is the positions, in the Set's order, of the rules of each list
// that cover one tool (or one MCP server).
type bucket struct {
	allow, ask, deny []int32
	// bash, in the bash bucket only, splits each list by the first word a
	// rule's command must start with.
	bash *bashIndex
}

// bashIndex narrows a bash call further: a rule such as Bash(git push:*)
// or Bash(deploy *) can only match a simple command whose first word is
// git or deploy, so each command is tried against the rules for its own
// first word (and those with no fixed first word) rather than all of
// them.
type bashIndex struct {
	deny, ask, allow words
}

// words is one list's bash rules: by the first word they need, and the
// rest (Bash alone, patterns starting with a wildcard, and patterns with
// shell operators, which are also tried on the whole line), each in the
// Set's order.
type words struct {
	by      map[string][]int32
	generic []int32
}

// view is the rules of one list a call is tried against: every rule when
// at is nil, else the rules at those positions, in order.
type view struct {
	rules []Rule
	at    []int32
}

func (v view) len() int {
	if v.at == nil {
		return len(v.rules)
	}
	return len(v.at)
}

func (v view) rule(k int) *Rule {
	if v.at == nil {
		return &v.rules[k]
	}
	return &v.rules[v.at[k]]
}

// NewSet builds a Set of the given rules, indexed by tool (see Decide).
// The slices are kept, not copied: do not change them afterwards.
func NewSet(allow, ask, deny []Rule) Set {
	s := Set{Allow: allow, Ask: ask, Deny: deny}
	s.idx = buildIndex(&s)
	return s
}

// indexed returns s with an index, building one unless s has a current
// one.
func (s Set) indexed() Set {
	if s.current() == nil {
		s.idx = buildIndex(&s)
	}
	return s
}

func buildIndex(s *Set) *index {
	ix := &index{allow: s.Allow, ask: s.Ask, deny: s.Deny, tools: map[string]*bucket{}, mcp: map[string]*bucket{}}
	add := func(rules []Rule, list func(*bucket) *[]int32) {
		for i := range rules {
			r := &rules[i]
			if r.spec.kind == kindMCP {
				l := list(ix.bucket(ix.mcp, r.value))
				*l = append(*l, int32(i))
				continue
			}
			for _, t := range r.spec.tools {
				l := list(ix.bucket(ix.tools, t))
				*l = append(*l, int32(i))
			}
		}
	}
	add(s.Deny, func(b *bucket) *[]int32 { return &b.deny })
	add(s.Ask, func(b *bucket) *[]int32 { return &b.ask })
	add(s.Allow, func(b *bucket) *[]int32 { return &b.allow })
	if b := ix.tools["bash"]; b != nil {
		b.bash = &bashIndex{deny: byWord(s.Deny, b.deny), ask: byWord(s.Ask, b.ask), allow: byWord(s.Allow, b.allow)}
	}
	return ix
}

func (ix *index) bucket(m map[string]*bucket, key string) *bucket {
	b := m[key]
	if b == nil {
		b = &bucket{}
		m[key] = b
	}
	return b
}

// sameSlice reports whether a and b are the same slice: same start, same
// length.
func sameSlice(a, b []Rule) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// current is s's index if it was built over s's slices as they are now.
func (s *Set) current() *index {
	ix := s.idx
	if ix == nil || !sameSlice(ix.allow, s.Allow) || !sameSlice(ix.ask, s.Ask) || !sameSlice(ix.deny, s.Deny) {
		return nil
	}
	return ix
}

// empty is the bucket of a tool no rule covers.
var empty = &bucket{allow: []int32{}, ask: []int32{}, deny: []int32{}}

// views gives the rules of each list a call of tool may match, and for
// bash the rules by first word (nil when s has no index).
func (s *Set) views(tool string) (deny, ask, allow view, bi *bashIndex) {
	ix := s.current()
	if ix == nil {
		return view{rules: s.Deny}, view{rules: s.Ask}, view{rules: s.Allow}, nil
	}
	var b *bucket
	if rest, ok := strings.CutPrefix(tool, "mcp__"); ok {
		server, _, _ := strings.Cut(rest, "__")
		b = ix.mcp[server]
	} else {
		b = ix.tools[tool]
	}
	if b == nil {
		b = empty
	}
	// A non-nil empty list keeps view from reading as "every rule".
	return view{s.Deny, nonNil(b.deny)}, view{s.Ask, nonNil(b.ask)}, view{s.Allow, nonNil(b.allow)}, b.bash
}

func nonNil(at []int32) []int32 {
	if at == nil {
		return empty.allow
	}
	return at
}

func byWord(rules []Rule, at []int32) words {
	w := words{by: map[string][]int32{}}
	for _, pos := range at {
		if word, ok := rules[pos].firstWord(); ok {
			w.by[word] = append(w.by[word], pos)
		} else {
			w.generic = append(w.generic, pos)
		}
	}
	return w
}

// firstWord is the first word every simple command a bash rule matches
// starts with, when the rule fixes one. Commands and patterns are
// normalized (single spaces, trimmed), so the word is what comes before
// the first space.
func (r *Rule) firstWord() (string, bool) {
	b := &r.bash
	if r.spec.kind != kindBash || r.any || b.compound {
		return "", false
	}
	lead := b.text // exact, or a prefix: the command is it, or it and a space and more
	if b.parts != nil {
		// Wildcard: the command starts with parts[0], which fixes a word
		// only if a space ends it within the literal.
		i := strings.IndexByte(b.parts[0], ' ')
		if i <= 0 {
			return "", false
		}
		return b.parts[0][:i], true
	}
	if lead == "" {
		return "", false // Bash(:*): every command
	}
	return cmdWord(lead), true
}

// cmdWord is a normalized command's first word.
func cmdWord(cmd string) string {
	if i := strings.IndexByte(cmd, ' '); i >= 0 {
		return cmd[:i]
	}
	return cmd
}

// firstOf is the first position, in order, of a or b (each ascending)
// for which ok holds, or -1.
func firstOf(a, b []int32, ok func(int32) bool) int32 {
	for len(a) > 0 || len(b) > 0 {
		var p int32
		switch {
		case len(b) == 0 || len(a) > 0 && a[0] < b[0]:
			p, a = a[0], a[1:]
		case len(a) == 0 || b[0] < a[0]:
			p, b = b[0], b[1:]
		default: // the same rule in both
			p, a, b = a[0], a[1:], b[1:]
		}
		if ok(p) {
			return p
		}
	}
	return -1
}

// firstAny is the first rule of the list (in the Set's order) that matches
// any simple command of a bash call, the deny and ask reading of
// Rule.matchAny, trying each command only against the rules for its
// first word and the generic ones. ci.cmds is not empty.
func (w *words) firstAny(rules []Rule, ci *callInfo) *Rule {
	best := firstOf(w.generic, nil, func(p int32) bool { return rules[p].matchAny(ci) })
	for i, cmd := range ci.cmds {
		st := cmd
		if ci.stripped != nil {
			st = ci.stripped[i]
		}
		ok := func(p int32) bool {
			if best >= 0 && p >= best {
				return true // nothing after the best so far can win
			}
			b := &rules[p].bash
			return b.match(cmd) || len(st) != len(cmd) && b.match(st)
		}
		try := func(word string) {
			if p := firstOf(w.by[word], nil, ok); p >= 0 && (best < 0 || p < best) {
				best = p
			}
		}
		try(cmdWord(cmd))
		if len(st) != len(cmd) {
			try(cmdWord(st))
		}
	}
	if best < 0 {
		return nil
	}
	return &rules[best]
}

// allowedBash is allowed for a bash call over a bashIndex: the same rules
// win, found among the generic rules and those for the first word of the
// line or of each command.
func (w *words) allowedBash(rules []Rule, ci *callInfo) (string, bool) {
	if p := firstOf(w.generic, w.by[cmdWord(ci.whole)], func(p int32) bool {
		r := &rules[p]
		return r.any || r.bash.parts == nil && !r.bash.prefix && ci.whole != "" && r.bash.text == ci.whole
	}); p >= 0 {
		return rules[p].Text, true
	}
	if !ci.cmdsWhole {
		return "", false
	}
	var first string
	var texts []string
	for _, cmd := range ci.cmds {
		p := firstOf(w.generic, w.by[cmdWord(cmd)], func(p int32) bool {
			r := &rules[p]
			return !r.any && r.bash.match(cmd)
		})
		if p < 0 {
			return "", false
		}
		first, texts = addText(first, texts, rules[p].Text)
	}
	return joinTexts(first, texts), true
}

// addText and joinTexts name the rules that allowed a bash call's
// commands, consecutive commands allowed by the same rule once; the
// joined text is built only when there is more than one.
func addText(first string, texts []string, found string) (string, []string) {
	switch {
	case first == "":
		first = found
	case texts == nil && found != first:
		texts = []string{first, found}
	case texts != nil && texts[len(texts)-1] != found:
		texts = append(texts, found)
	}
	return first, texts
}

func joinTexts(first string, texts []string) string {
	if texts == nil {
		return first
	}
	return strings.Join(texts, ", ")
}
