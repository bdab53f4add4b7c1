package fake

import (
	"regexp/syntax"
	"slices"
	"strings"
)

// maxNamesPerPattern bounds the names one match.model pattern may stand
// for ([a-z] alone would be 26): a pattern naming more is a pattern, not a
// list of models.
const maxNamesPerPattern = 32

// Models is the model names the scenario's rules name in match.model, in
// the order they first appear: what GET /v1/models lists on both wires
// (ModelLister) and GET /v1/models/{id} knows. A pattern names models when
// it matches a few fixed strings, anchored at both ends or at neither:
// claude-sonnet-4-6, ^gpt-5\.6-terra$, ^gpt-6-(sol|luna)$. A lone `.` in one stands for
// itself (gpt-5.6-terra names gpt-5.6-terra): model ids hold dots, and the
// pattern matches the name either way, so every name listed is one its rule
// answers. A pattern of an open set (gpt-.*) or anchored at one end only
// (^claude: a family) names none. nil when
// no rule names one: the server then lists each wire's defaults.
func (s *Scenario) Models() []string {
	if s == nil {
		return nil
	}
	var ids []string
	for _, r := range s.rules {
		for _, id := range patternNames(r.match.model) {
			if id != "" && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// patternNames is what a compiled match.model names, if anything.
func patternNames(m textMatch) []string {
	switch {
	case !m.set:
		return nil
	case m.isLit:
		// Stored as the literal it is (scenario_match.go), anchors and
		// escapes resolved.
		return []string{m.literal}
	}
	re, err := syntax.Parse(m.re.String(), syntax.Perl)
	if err != nil {
		return nil // compiled once already: cannot happen
	}
	return wholeNames(re.Simplify())
}

// wholeNames is what a pattern names read as a whole: anchored at both ends
// or at neither (a literal model id). One anchored at one end only (^claude,
// -5$) is a prefix or a suffix, a family of models, and names none.
func wholeNames(re *syntax.Regexp) []string {
	switch re.Op {
	case syntax.OpAlternate:
		var all []string
		for _, sub := range re.Sub {
			all = append(all, wholeNames(sub)...)
		}
		return all
	case syntax.OpCapture:
		return wholeNames(re.Sub[0])
	case syntax.OpConcat:
		first, last := re.Sub[0].Op, re.Sub[len(re.Sub)-1].Op
		start := first == syntax.OpBeginText || first == syntax.OpBeginLine
		end := last == syntax.OpEndText || last == syntax.OpEndLine
		if start != end {
			return nil
		}
	}
	names, ok := finiteNames(re, false)
	if !ok || len(names) > maxNamesPerPattern {
		return nil
	}
	return names
}

// finiteNames is the strings re matches whole, when they are few: literals,
// concatenations, alternations and small classes of them, between anchors.
// inName says re is a part of a concatenation, where `.` stands for itself.
func finiteNames(re *syntax.Regexp, inName bool) ([]string, bool) {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			// (?i): the parser keeps one case of each letter; model
			// ids are lower case, and the pattern matches either.
			return []string{strings.ToLower(string(re.Rune))}, true
		}
		return []string{string(re.Rune)}, true
	case syntax.OpEmptyMatch, syntax.OpBeginText, syntax.OpEndText, syntax.OpBeginLine, syntax.OpEndLine:
		return []string{""}, true
	case syntax.OpAnyCharNotNL, syntax.OpAnyChar:
		return []string{"."}, inName
	case syntax.OpCapture:
		return finiteNames(re.Sub[0], inName)
	case syntax.OpCharClass:
		return classNames(re.Rune)
	case syntax.OpAlternate:
		var all []string
		for _, sub := range re.Sub {
			names, ok := finiteNames(sub, inName)
			if !ok || len(all)+len(names) > maxNamesPerPattern {
				return nil, false
			}
			all = append(all, names...)
		}
		return all, true
	case syntax.OpConcat:
		all := []string{""}
		for _, sub := range re.Sub {
			names, ok := finiteNames(sub, true)
			if !ok || len(all)*len(names) > maxNamesPerPattern {
				return nil, false
			}
			all = product(all, names)
		}
		return all, true
	}
	return nil, false // repetitions, word boundaries, no match
}

// classNames is the runes of a character class (lo-hi pairs) as strings,
// when there are few.
func classNames(ranges []rune) ([]string, bool) {
	var out []string
	for i := 0; i+1 < len(ranges); i += 2 {
		for r := ranges[i]; r <= ranges[i+1]; r++ {
			if len(out) == maxNamesPerPattern {
				return nil, false
			}
			out = append(out, string(r))
		}
	}
	return out, true
}

// product is every a followed by every b.
func product(as, bs []string) []string {
	out := make([]string, 0, len(as)*len(bs))
	for _, a := range as {
		for _, b := range bs {
			out = append(out, a+b)
		}
	}
	return out
}
