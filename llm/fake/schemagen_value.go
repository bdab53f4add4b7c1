package fake

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"regexp/syntax"
	"strings"
)

// Scalar values for schemaReply: numbers inside their bounds, strings of
// a format or a pattern.

// formatSamples holds one valid value for each format a strict schema may
// name (OpenAI's structured-outputs guide lists date-time, time, date,
// duration, email, hostname, ipv4, ipv6 and uuid), plus the common URI
// forms; the validator asserts formats, so each is checked when used.
var formatSamples = map[string]string{
	"date-time":     "2026-01-01T00:00:00Z",
	"date":          "2026-01-01",
	"time":          "00:00:00Z",
	"duration":      "P1D",
	"email":         "user@example.com",
	"idn-email":     "user@example.com",
	"hostname":      "example.com",
	"idn-hostname":  "example.com",
	"ipv4":          "192.0.2.1",
	"ipv6":          "2001:db8::1",
	"uuid":          "00000000-0000-4000-8000-000000000000",
	"uri":           "https://example.com/",
	"iri":           "https://example.com/",
	"uri-reference": "https://example.com/",
	"iri-reference": "https://example.com/",
	"uri-template":  "https://example.com/{id}",
	"json-pointer":  "/a",
	"regex":         "a",
}

// genNumber picks a number inside the schema's bounds: 0 when it fits,
// otherwise the lowest allowed value (the lowest multiple, for integers
// and multipleOf). Arithmetic is exact (big.Rat), so 0.1 steps land on
// multiples the validator agrees with.
func genNumber(s *orderedObject, integer bool, path []string) (any, error) {
	b, err := readBounds(s, path)
	if err != nil {
		return nil, err
	}
	step := b.mult
	if integer {
		if step == nil {
			step = big.NewRat(1, 1)
		} else if !step.IsInt() {
			// The least common multiple of 1 and p/q is p.
			step = new(big.Rat).SetInt(step.Num())
		}
	}
	c := new(big.Rat)
	if !b.contains(c) {
		switch {
		case b.lo != nil && step != nil:
			c = ceilMultiple(b.lo, step)
			if b.loEx && c.Cmp(b.lo) == 0 {
				c.Add(c, step)
			}
		case b.lo != nil && !b.loEx:
			c.Set(b.lo)
		case b.lo != nil && b.hi != nil:
			c.Add(b.lo, b.hi).Quo(c, big.NewRat(2, 1))
		case b.lo != nil:
			c.Add(b.lo, big.NewRat(1, 1))
		case step != nil: // only an upper bound, below 0
			c = ceilMultiple(b.hi, step)
			for !b.contains(c) && c.Cmp(b.hi) >= 0 {
				c.Sub(c, step)
			}
		case !b.hiEx:
			c.Set(b.hi)
		default:
			c.Sub(b.hi, big.NewRat(1, 1))
		}
	}
	if !b.contains(c) {
		return nil, &schemaError{path: path, rule: "no number lies within minimum, maximum and multipleOf"}
	}
	return ratNumber(c), nil
}

// bounds are a number schema's limits, nil where absent.
type bounds struct {
	lo, hi, mult *big.Rat
	loEx, hiEx   bool
}

func (b *bounds) contains(c *big.Rat) bool {
	if b.lo != nil && (c.Cmp(b.lo) < 0 || b.loEx && c.Cmp(b.lo) == 0) {
		return false
	}
	if b.hi != nil && (c.Cmp(b.hi) > 0 || b.hiEx && c.Cmp(b.hi) == 0) {
		return false
	}
	if b.mult != nil && !new(big.Rat).Quo(c, b.mult).IsInt() {
		return false
	}
	return true
}

// readBounds reads minimum, maximum, the exclusive ones (numbers, as
// since draft 6) and multipleOf; the tighter of two lower (or upper)
// bounds wins.
func readBounds(s *orderedObject, path []string) (*bounds, error) {
	b := &bounds{}
	for _, k := range []string{"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "multipleOf"} {
		v, ok := s.get(k)
		if !ok {
			continue
		}
		n, isNum := v.(json.Number)
		r, okRat := new(big.Rat).SetString(n.String())
		if !isNum || !okRat {
			if k == "exclusiveMinimum" || k == "exclusiveMaximum" {
				continue // draft 4's boolean form: the compiler has judged it
			}
			return nil, &schemaError{path: sub(path, k), rule: k + " must be a number"}
		}
		switch k {
		case "minimum", "exclusiveMinimum":
			if b.lo == nil || r.Cmp(b.lo) > 0 || r.Cmp(b.lo) == 0 && k == "exclusiveMinimum" {
				b.lo, b.loEx = r, k == "exclusiveMinimum"
			}
		case "maximum", "exclusiveMaximum":
			if b.hi == nil || r.Cmp(b.hi) < 0 || r.Cmp(b.hi) == 0 && k == "exclusiveMaximum" {
				b.hi, b.hiEx = r, k == "exclusiveMaximum"
			}
		case "multipleOf":
			if r.Sign() <= 0 {
				return nil, &schemaError{path: sub(path, k), rule: "multipleOf must be greater than 0"}
			}
			b.mult = r
		}
	}
	return b, nil
}

// ceilMultiple is the least multiple of step at or above x.
func ceilMultiple(x, step *big.Rat) *big.Rat {
	q := new(big.Rat).Quo(x, step)
	k := new(big.Int).Div(q.Num(), q.Denom()) // floor, as Div rounds toward -inf for positive divisors
	if !q.IsInt() {
		k.Add(k, big.NewInt(1))
	}
	return new(big.Rat).Mul(new(big.Rat).SetInt(k), step)
}

// ratNumber writes an exact rational as a JSON number: an integer, or a
// decimal with as many digits as its denominator needs (bounds written
// in decimal only ever give denominators of 2s and 5s; others are cut at
// 20 digits).
func ratNumber(r *big.Rat) json.Number {
	if r.IsInt() {
		return json.Number(r.Num().String())
	}
	ten := big.NewInt(10)
	p := big.NewInt(10)
	for digits := 1; digits < 20; digits++ {
		if new(big.Int).Mod(p, r.Denom()).Sign() == 0 {
			return json.Number(r.FloatString(digits))
		}
		p.Mul(p, ten)
	}
	return json.Number(r.FloatString(20))
}

// patternSample builds a short string the pattern matches, by walking its
// syntax tree: the first alternative, the fewest repetitions, the first
// character of each class. JSON Schema patterns are ECMA-262; RE2's
// syntax covers the ones structured outputs accept (no lookaround, no
// backreferences), and the validator checks the result.
func patternSample(pattern string) (string, error) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return "", fmt.Errorf("pattern %q: %w", pattern, err)
	}
	var b strings.Builder
	if err := writeRegexpSample(&b, re.Simplify()); err != nil {
		return "", fmt.Errorf("pattern %q: %w", pattern, err)
	}
	return b.String(), nil
}

func writeRegexpSample(b *strings.Builder, re *syntax.Regexp) error {
	switch re.Op {
	case syntax.OpNoMatch:
		return errors.New("matches nothing")
	case syntax.OpLiteral:
		b.WriteString(string(re.Rune))
	case syntax.OpCharClass:
		if len(re.Rune) == 0 {
			return errors.New("has an empty character class")
		}
		b.WriteRune(classSample(re.Rune))
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		b.WriteByte('a')
	case syntax.OpCapture, syntax.OpPlus:
		return writeRegexpSample(b, re.Sub[0])
	case syntax.OpRepeat:
		for i := 0; i < re.Min; i++ {
			if err := writeRegexpSample(b, re.Sub[0]); err != nil {
				return err
			}
		}
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			if err := writeRegexpSample(b, sub); err != nil {
				return err
			}
		}
	case syntax.OpAlternate:
		return writeRegexpSample(b, re.Sub[0])
	}
	// Star, Quest, anchors, boundaries and the empty match add nothing.
	return nil
}

// classSample picks a character of a class, preferring a printable ASCII
// letter or digit, so the sample reads well.
func classSample(ranges []rune) rune {
	for i := 0; i+1 < len(ranges); i += 2 {
		for _, c := range "aA0 -_." {
			if ranges[i] <= c && c <= ranges[i+1] {
				return c
			}
		}
	}
	for i := 0; i+1 < len(ranges); i += 2 {
		if ranges[i+1] >= 0x21 && ranges[i] <= 0x7e {
			return max(ranges[i], 0x21)
		}
	}
	return ranges[0]
}
