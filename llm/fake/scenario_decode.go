package fake

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"

	"github.com/deputy-run/deputy/internal/yamlpos"
	"github.com/deputy-run/deputy/llm"
)

// The scenario decoder walks goccy/go-yaml's AST itself instead of
// unmarshalling into structs: every error (unknown field, bad regexp,
// template, duration) then carries the line of the node at fault, errors come
// in document order, and a tool input keeps its keys in the order written.

// ScenarioError is a scenario that cannot be loaded, with where.
type ScenarioError struct {
	File         string
	Line, Column int // 0 when the error has no position
	Msg          string
}

func (e *ScenarioError) Error() string {
	if e.Line == 0 {
		return e.File + ": " + e.Msg
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
}

// Bounds that keep a hostile or mistaken file from exhausting memory or the
// stack: alias expansion ("billion laughs"), nesting, and repeat.
const (
	maxAliasExpansions = 10_000
	maxNesting         = 100
	maxRepeat          = 1000
)

var faultKinds = []FaultKind{
	FaultRateLimit, FaultOverloaded, FaultServerError, FaultSlowFirstByte,
	FaultCutStream, FaultErrorEvent, FaultMalformedJSON,
}

type decoder struct {
	file    string
	anchors map[string]ast.Node
	aliases int
}

// entry is one key of a YAML mapping, merge keys resolved.
type entry struct {
	key     string
	keyNode ast.Node
	val     ast.Node
}

func decodeScenario(data []byte, file string) (*Scenario, error) {
	f, err := parseYAML(data, file)
	if err != nil {
		var se *ScenarioError
		if errors.As(err, &se) {
			return nil, se
		}
		pos, msg := yamlpos.OfError(err)
		return nil, errorAt(file, pos, "%s", msg)
	}
	d := &decoder{file: file, anchors: map[string]ast.Node{}}
	var body ast.Node
	for i, doc := range f.Docs {
		if doc == nil || doc.Body == nil {
			continue
		}
		if body != nil {
			return nil, d.errAt(doc.Body, "a scenario file holds one YAML document (document %d is extra)", i+1)
		}
		body = doc.Body
	}
	if body == nil {
		return nil, &ScenarioError{File: file, Msg: "empty scenario"}
	}
	// Anchors are registered up front because the decoder does not visit
	// fields strictly in document order (a rule's reply fields come after
	// its match); resolve registers them again as it meets them, so an
	// anchor redefined later in the file still applies from there on.
	d.registerAnchors(body)
	return d.scenario(body)
}

// parseYAML parses a scenario whose size and shape are within bounds.
func parseYAML(data []byte, file string) (*ast.File, error) {
	if len(data) > maxScenarioBytes {
		return nil, errorAt(file, yamlpos.Pos{}, "%d bytes is more than a scenario may have (%d)", len(data), maxScenarioBytes)
	}
	return yamlpos.Parse(data, func(tokens token.Tokens) error { return checkShape(tokens, file) })
}

// Limits on the shape of the YAML, checked on the tokens before parsing.
// goccy/go-yaml's lexer is linear, but its parser takes quadratic time in
// the nesting depth and in the number of keys of one block mapping (100,000
// keys: a minute). No scenario comes near these limits; a hostile or
// generated-gone-wrong file is refused at once instead of hanging.
const (
	maxScenarioBytes = 4 << 20
	maxBlockColumn   = 1000
	maxMappingKeys   = 10_000
)

func checkShape(tokens token.Tokens, file string) error {
	fail := func(tk *token.Token, format string, args ...any) error {
		return errorAt(file, yamlpos.OfToken(tk), format, args...)
	}
	flow := 0
	// block is the stack of open block mappings: key column and key count.
	type open struct{ col, keys int }
	var block []open
	for i, tk := range tokens {
		switch tk.Type {
		case token.SequenceStartType, token.MappingStartType:
			flow++
			if flow > maxNesting {
				return fail(tk, "nested more than %d levels deep", maxNesting)
			}
		case token.SequenceEndType, token.MappingEndType:
			flow--
		case token.SequenceEntryType, token.MappingValueType:
			if flow > 0 || tk.Position == nil {
				continue
			}
			col := tk.Position.Column
			if tk.Type == token.MappingValueType && i > 0 && tokens[i-1].Position != nil {
				col = tokens[i-1].Position.Column // where the key starts
			}
			if col > maxBlockColumn {
				return fail(tk, "indented or nested more than %d columns deep", maxBlockColumn)
			}
			for len(block) > 0 && block[len(block)-1].col > col {
				block = block[:len(block)-1]
			}
			if tk.Type == token.SequenceEntryType {
				continue
			}
			if len(block) == 0 || block[len(block)-1].col != col {
				block = append(block, open{col: col})
			}
			top := &block[len(block)-1]
			top.keys++
			if top.keys > maxMappingKeys {
				return fail(tk, "a mapping with more than %d keys", maxMappingKeys)
			}
		}
	}
	return nil
}

func errorAt(file string, p yamlpos.Pos, format string, args ...any) *ScenarioError {
	return &ScenarioError{File: file, Line: p.Line, Column: p.Column, Msg: fmt.Sprintf(format, args...)}
}

func (d *decoder) errAt(n ast.Node, format string, args ...any) error {
	return errorAt(d.file, yamlpos.Of(n), format, args...)
}

func (d *decoder) where(n ast.Node) string {
	return d.file + ":" + strconv.Itoa(yamlpos.Of(n).Line)
}

// resolve follows anchors, aliases and tags to the node holding a value. It
// returns the !!str tag when present, which makes a scalar a string.
func (d *decoder) resolve(n ast.Node) (ast.Node, bool, error) {
	forceStr := false
	for range maxNesting {
		switch v := n.(type) {
		case *ast.AnchorNode:
			if v.Name != nil {
				d.anchors[v.Name.GetToken().Value] = v.Value
			}
			n = v.Value
		case *ast.AliasNode:
			if v.Value == nil {
				return nil, false, d.errAt(n, "alias without a name")
			}
			name := v.Value.GetToken().Value
			target, ok := d.anchors[name]
			if !ok {
				return nil, false, d.errAt(n, "unknown alias *%s", name)
			}
			d.aliases++
			if d.aliases > maxAliasExpansions {
				return nil, false, d.errAt(n, "more than %d alias expansions", maxAliasExpansions)
			}
			n = target
		case *ast.TagNode:
			if v.Start != nil && v.Start.Value == "!!str" {
				forceStr = true
			}
			n = v.Value
		case *ast.MappingKeyNode:
			n = v.Value
		default:
			return n, forceStr, nil
		}
	}
	return nil, false, d.errAt(n, "anchors, aliases or tags nested too deeply")
}

// scalarText is the text of a scalar node; ok is false for collections.
func scalarText(n ast.Node) (string, bool) {
	switch v := n.(type) {
	case *ast.StringNode:
		return v.Value, true
	case *ast.LiteralNode:
		if v.Value == nil {
			return "", true
		}
		return v.Value.Value, true
	case *ast.NullNode:
		return "", true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		return n.GetToken().Value, true
	}
	return "", false
}

func nodeKind(n ast.Node) string {
	switch n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.StringNode, *ast.LiteralNode:
		return "a string"
	case *ast.IntegerNode:
		return "an integer"
	case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "a number"
	case *ast.BoolNode:
		return "a boolean"
	case *ast.NullNode:
		return "null"
	case nil:
		return "nothing"
	}
	return n.Type().String()
}

// mapping returns a mapping's entries in order. Merge keys (<<: *base) are
// expanded in place; keys written explicitly win over merged ones. A null
// value is an empty mapping.
func (d *decoder) mapping(n ast.Node, what string, depth int) ([]entry, error) {
	if depth > maxNesting {
		return nil, d.errAt(n, "%s: nested too deeply", what)
	}
	n, _, err := d.resolve(n)
	if err != nil {
		return nil, err
	}
	if _, null := n.(*ast.NullNode); null {
		return nil, nil
	}
	values, ok := yamlpos.Pairs(n)
	if !ok {
		return nil, d.errAt(n, "%s must be a mapping, not %s", what, nodeKind(n))
	}
	explicit := map[string]bool{}
	for _, mv := range values {
		if _, merge := mv.Key.(*ast.MergeKeyNode); merge {
			continue
		}
		k, err := d.key(mv.Key, what)
		if err != nil {
			return nil, err
		}
		explicit[k] = true
	}
	added := map[string]bool{}
	var out []entry
	for _, mv := range values {
		if _, merge := mv.Key.(*ast.MergeKeyNode); merge {
			srcs, err := d.mergeSources(mv.Value, what)
			if err != nil {
				return nil, err
			}
			for _, src := range srcs {
				es, err := d.mapping(src, what, depth+1)
				if err != nil {
					return nil, err
				}
				for _, e := range es {
					if !explicit[e.key] && !added[e.key] {
						added[e.key] = true
						out = append(out, e)
					}
				}
			}
			continue
		}
		k, _ := d.key(mv.Key, what)
		if added[k] {
			return nil, d.errAt(mv.Key, "%s: key %q appears twice", what, k)
		}
		added[k] = true
		out = append(out, entry{key: k, keyNode: mv.Key, val: mv.Value})
	}
	return out, nil
}

func (d *decoder) key(n ast.Node, what string) (string, error) {
	kn, _, err := d.resolve(n)
	if err != nil {
		return "", err
	}
	if _, null := kn.(*ast.NullNode); null {
		return kn.GetToken().Value, nil
	}
	k, ok := scalarText(kn)
	if !ok {
		return "", d.errAt(n, "%s: a key must be a scalar, not %s", what, nodeKind(kn))
	}
	return k, nil
}

// mergeSources is the value of a merge key: a mapping or a list of them.
func (d *decoder) mergeSources(n ast.Node, what string) ([]ast.Node, error) {
	rn, _, err := d.resolve(n)
	if err != nil {
		return nil, err
	}
	if seq, ok := rn.(*ast.SequenceNode); ok {
		return seq.Values, nil
	}
	return []ast.Node{n}, nil
}

func (d *decoder) list(n ast.Node, what string) ([]ast.Node, error) {
	rn, _, err := d.resolve(n)
	if err != nil {
		return nil, err
	}
	switch v := rn.(type) {
	case *ast.SequenceNode:
		return v.Values, nil
	case *ast.NullNode:
		return nil, nil
	}
	return nil, d.errAt(rn, "%s must be a list, not %s", what, nodeKind(rn))
}

func (d *decoder) unknown(e entry, what, known string) error {
	return d.errAt(e.keyNode, "unknown field %q in %s (known: %s)", e.key, what, known)
}

func (d *decoder) str(n ast.Node, what string) (string, error) {
	rn, _, err := d.resolve(n)
	if err != nil {
		return "", err
	}
	s, ok := scalarText(rn)
	if !ok {
		return "", d.errAt(rn, "%s must be a string, not %s", what, nodeKind(rn))
	}
	return s, nil
}

func (d *decoder) int(n ast.Node, what string) (int64, error) {
	rn, _, err := d.resolve(n)
	if err != nil {
		return 0, err
	}
	if v, ok := rn.(*ast.IntegerNode); ok {
		if i, ok := intValue(v); ok {
			return i, nil
		}
		return 0, d.errAt(rn, "%s: %s is out of range", what, v.GetToken().Value)
	}
	return 0, d.errAt(rn, "%s must be an integer, not %s", what, nodeKind(rn))
}

// intValue is an integer node's value as an int64. goccy/go-yaml stores
// non-negative integers as uint64, negative ones as int64, and nil when the
// number overflows both.
func intValue(v *ast.IntegerNode) (int64, bool) {
	switch x := v.Value.(type) {
	case int64:
		return x, true
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x), true
		}
	}
	return 0, false
}

// count is an integer in lo..hi.
func (d *decoder) count(n ast.Node, what string, lo, hi int64) (int, error) {
	i, err := d.int(n, what)
	if err != nil {
		return 0, err
	}
	if i < lo || i > hi {
		return 0, d.errAt(n, "%s must be in %d..%d, not %d", what, lo, hi, i)
	}
	return int(i), nil
}

func (d *decoder) bool(n ast.Node, what string) (bool, error) {
	rn, _, err := d.resolve(n)
	if err != nil {
		return false, err
	}
	if v, ok := rn.(*ast.BoolNode); ok {
		return v.Value, nil
	}
	return false, d.errAt(rn, "%s must be true or false, not %s", what, nodeKind(rn))
}

func (d *decoder) duration(n ast.Node, what string) (time.Duration, error) {
	rn, _, err := d.resolve(n)
	if err != nil {
		return 0, err
	}
	if v, ok := rn.(*ast.IntegerNode); ok {
		if i, ok := intValue(v); ok && i == 0 {
			return 0, nil
		}
	}
	s, ok := rn.(*ast.StringNode)
	if !ok {
		return 0, d.errAt(rn, "%s must be a duration such as 200ms or 1.5s, not %s", what, nodeKind(rn))
	}
	dur, err := time.ParseDuration(s.Value)
	if err != nil {
		return 0, d.errAt(rn, "%s: %q is not a duration such as 200ms or 1.5s", what, s.Value)
	}
	if dur < 0 {
		return 0, d.errAt(rn, "%s must not be negative", what)
	}
	return dur, nil
}

func (d *decoder) regexp(n ast.Node, what string) (textMatch, error) {
	s, err := d.str(n, what)
	if err != nil {
		return textMatch{}, err
	}
	m, err := compileTextMatch(s)
	if err != nil {
		return textMatch{}, d.errAt(n, "%s: %v", what, err)
	}
	return m, nil
}

func (d *decoder) tmpl(n ast.Node, what string) (*tmpl, error) {
	s, err := d.str(n, what)
	if err != nil {
		return nil, err
	}
	return d.tmplOf(s, n, what)
}

func (d *decoder) tmplOf(s string, n ast.Node, what string) (*tmpl, error) {
	t, err := newTmpl(s, what, d.where(n))
	if err != nil {
		return nil, d.errAt(n, "%s: %v", what, err)
	}
	return t, nil
}

const scenarioFields = "name, description, seed, latency, faults, rules, default"

func (d *decoder) scenario(n ast.Node) (*Scenario, error) {
	entries, err := d.mapping(n, "scenario", 0)
	if err != nil {
		return nil, err
	}
	base := filepath.Base(d.file)
	s := &Scenario{file: d.file, name: strings.TrimSuffix(base, filepath.Ext(base))}
	for _, e := range entries {
		switch e.key {
		case "name":
			s.name, err = d.str(e.val, "name")
		case "description":
			_, err = d.str(e.val, "description")
		case "seed":
			s.seed, err = d.int(e.val, "seed")
		case "latency":
			s.latency, err = d.latency(e.val, "latency")
		case "faults":
			s.faults, err = d.faults(e.val)
		case "rules":
			s.rules, err = d.rules(e.val)
		case "default":
			var r reply
			if err = d.replyOnly(e.val, "default", &r); err == nil {
				s.def = &r
			}
		default:
			if strings.HasPrefix(e.key, "x-") {
				// Extension keys, as in Compose files: a place to
				// define anchors for the rules to alias.
				d.registerAnchors(e.val)
				continue
			}
			err = d.unknown(e, "the scenario", scenarioFields+", or x-anything")
		}
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

// registerAnchors records every anchor under n, for values that are not
// otherwise decoded.
func (d *decoder) registerAnchors(n ast.Node) {
	yamlpos.Walk(n, func(n ast.Node) {
		if a, ok := n.(*ast.AnchorNode); ok && a.Name != nil {
			d.anchors[a.Name.GetToken().Value] = a.Value
		}
	})
}

func (d *decoder) latency(n ast.Node, what string) (latency, error) {
	var l latency
	entries, err := d.mapping(n, what, 0)
	if err != nil {
		return l, err
	}
	for _, e := range entries {
		switch e.key {
		case "first_byte":
			l.firstByte, err = d.duration(e.val, what+".first_byte")
			l.hasFirstByte = true
		case "per_token":
			l.perToken, err = d.duration(e.val, what+".per_token")
			l.hasPerToken = true
		default:
			err = d.unknown(e, what, "first_byte, per_token")
		}
		if err != nil {
			return l, err
		}
	}
	return l, nil
}

// mappings decodes a list of mappings (faults, rules, tool_calls) with
// each, which gets an entry of the list, its name (rules[2]) and its keys.
func mappings[T any](d *decoder, n ast.Node, what string, each func(item ast.Node, what string, entries []entry) (T, error)) ([]T, error) {
	items, err := d.list(n, what)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(items))
	for i, item := range items {
		w := fmt.Sprintf("%s[%d]", what, i)
		entries, err := d.mapping(item, w, 0)
		if err != nil {
			return nil, err
		}
		v, err := each(item, w, entries)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (d *decoder) faults(n ast.Node) ([]faultRule, error) {
	return mappings(d, n, "faults", func(item ast.Node, what string, entries []entry) (faultRule, error) {
		var fr faultRule
		var rest []entry
		var err error
		for _, e := range entries {
			switch e.key {
			case "rate":
				fr.rate, err = d.rate(e.val, what+".rate")
			case "on_request":
				fr.onRequest, err = d.requestNumbers(e.val, what+".on_request")
			default:
				rest = append(rest, e)
			}
			if err != nil {
				return fr, err
			}
		}
		if fr.fault, err = d.fault(item, rest, what, "kind, rate, on_request, retry_after, delay, after_bytes"); err != nil {
			return fr, err
		}
		if fr.rate == 0 && len(fr.onRequest) == 0 {
			return fr, d.errAt(item, "%s never fires: give it a rate or on_request", what)
		}
		return fr, nil
	})
}

func (d *decoder) rate(n ast.Node, what string) (float64, error) {
	rn, _, err := d.resolve(n)
	if err != nil {
		return 0, err
	}
	var r float64
	switch v := rn.(type) {
	case *ast.FloatNode:
		r = v.Value
	case *ast.IntegerNode:
		i, ok := intValue(v)
		if !ok {
			return 0, d.errAt(rn, "%s must be in 0..1", what)
		}
		r = float64(i)
	default:
		return 0, d.errAt(rn, "%s must be a number in 0..1, not %s", what, nodeKind(rn))
	}
	if !(r >= 0 && r <= 1) {
		return 0, d.errAt(rn, "%s must be in 0..1, not %v", what, r)
	}
	return r, nil
}

func (d *decoder) requestNumbers(n ast.Node, what string) ([]int, error) {
	items, err := d.list(n, what)
	if err != nil {
		return nil, err
	}
	out := make([]int, 0, len(items))
	for _, item := range items {
		k, err := d.count(item, what, 1, math.MaxInt32)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, nil
}

// fault decodes a fault's own fields from entries; n is the fault's node,
// for a missing kind.
func (d *decoder) fault(n ast.Node, entries []entry, what, known string) (Fault, error) {
	var f Fault
	var err error
	for _, e := range entries {
		switch e.key {
		case "kind":
			var k string
			if k, err = d.str(e.val, what+".kind"); err == nil {
				f.Kind = FaultKind(k)
				err = d.checkFaultKind(e.val, f.Kind, what)
			}
		case "retry_after":
			f.RetryAfter, err = d.duration(e.val, what+".retry_after")
		case "delay":
			f.Delay, err = d.duration(e.val, what+".delay")
		case "after_bytes":
			f.AfterBytes, err = d.count(e.val, what+".after_bytes", 0, math.MaxInt32)
		default:
			err = d.unknown(e, what, known)
		}
		if err != nil {
			return f, err
		}
	}
	if f.Kind == "" {
		return f, d.errAt(n, "%s needs a kind (one of %s)", what, faultKindList())
	}
	return f, nil
}

func (d *decoder) checkFaultKind(n ast.Node, k FaultKind, what string) error {
	for _, known := range faultKinds {
		if k == known {
			return nil
		}
	}
	return d.errAt(n, "%s.kind: unknown fault %q (one of %s)", what, k, faultKindList())
}

func faultKindList() string {
	names := make([]string, len(faultKinds))
	for i, k := range faultKinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

const ruleFields = "name, match, times, text, thinking, tool_calls, stop_reason, usage, latency, fault"

func (d *decoder) rules(n ast.Node) ([]*rule, error) {
	return mappings(d, n, "rules", func(item ast.Node, what string, entries []entry) (*rule, error) {
		r := &rule{}
		var replyEntries []entry
		var err error
		for _, e := range entries {
			switch e.key {
			case "name":
				// A label for readers of the file; errors name rules by
				// index and line.
				_, err = d.str(e.val, what+".name")
			case "match":
				r.match, err = d.matcher(e.val, what+".match")
			case "times":
				var t int
				t, err = d.count(e.val, what+".times", 1, math.MaxInt32)
				r.times = int64(t)
			default:
				replyEntries = append(replyEntries, e)
			}
			if err != nil {
				return nil, err
			}
		}
		if err := d.reply(item, replyEntries, what, ruleFields, &r.reply); err != nil {
			return nil, err
		}
		return r, nil
	})
}

const replyFields = "text, thinking, tool_calls, stop_reason, usage, latency, fault"

// replyOnly decodes a mapping holding reply fields only (the default).
func (d *decoder) replyOnly(n ast.Node, what string, r *reply) error {
	entries, err := d.mapping(n, what, 0)
	if err != nil {
		return err
	}
	return d.reply(n, entries, what, replyFields, r)
}

func (d *decoder) reply(n ast.Node, entries []entry, what, known string, r *reply) error {
	answers := false
	var err error
	for _, e := range entries {
		switch e.key {
		case "text":
			r.text, err = d.tmpl(e.val, what+".text")
			answers = true
		case "thinking":
			if r.thinking, err = d.tmpl(e.val, what+".thinking"); err == nil && r.thinking.isStatic() {
				r.thinkingRaw = thinkingBlock(r.thinking.static)
			}
			answers = true
		case "tool_calls":
			r.calls, err = d.toolCalls(e.val, what+".tool_calls")
			answers = true
		case "stop_reason":
			var s string
			if s, err = d.str(e.val, what+".stop_reason"); err == nil && s == "" {
				err = d.errAt(e.val, "%s.stop_reason must not be empty", what)
			}
			r.stopReason = llm.StopReason(s)
		case "usage":
			r.usage, err = d.usage(e.val, what+".usage")
		case "latency":
			r.latency, err = d.latency(e.val, what+".latency")
		case "fault":
			var fe []entry
			if fe, err = d.mapping(e.val, what+".fault", 0); err == nil {
				var f Fault
				f, err = d.fault(e.val, fe, what+".fault", "kind, retry_after, delay, after_bytes")
				r.fault = &f
			}
			answers = true
		default:
			err = d.unknown(e, what, known)
		}
		if err != nil {
			return err
		}
	}
	if !answers {
		return d.errAt(n, "%s answers nothing: give it text, tool_calls, thinking or a fault", what)
	}
	if r.thinking != nil {
		r.blocks++
	}
	if r.text != nil {
		r.blocks++
	}
	for _, c := range r.calls {
		r.blocks += c.repeat
	}
	return nil
}

func (d *decoder) usage(n ast.Node, what string) (*llm.Usage, error) {
	entries, err := d.mapping(n, what, 0)
	if err != nil {
		return nil, err
	}
	u := &llm.Usage{}
	for _, e := range entries {
		var v int
		switch e.key {
		case "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens":
			v, err = d.count(e.val, what+"."+e.key, 0, math.MaxInt32)
		default:
			err = d.unknown(e, what, "input_tokens, output_tokens, cache_read_tokens, cache_write_tokens")
		}
		if err != nil {
			return nil, err
		}
		switch e.key {
		case "input_tokens":
			u.InputTokens = int64(v)
		case "output_tokens":
			u.OutputTokens = int64(v)
		case "cache_read_tokens":
			u.CacheReadTokens = int64(v)
		case "cache_write_tokens":
			u.CacheWriteTokens = int64(v)
		}
	}
	return u, nil
}

func (d *decoder) toolCalls(n ast.Node, what string) ([]toolCall, error) {
	return mappings(d, n, what, func(item ast.Node, w string, entries []entry) (toolCall, error) {
		c := toolCall{repeat: 1}
		var input, raw ast.Node
		var err error
		for _, e := range entries {
			switch e.key {
			case "name":
				c.name, err = d.str(e.val, w+".name")
			case "input":
				input = e.val
			case "raw_input":
				raw = e.val
				c.raw, err = d.tmpl(e.val, w+".raw_input")
			case "repeat":
				c.repeat, err = d.count(e.val, w+".repeat", 1, maxRepeat)
			default:
				err = d.unknown(e, w, "name, input, raw_input, repeat")
			}
			if err != nil {
				return c, err
			}
		}
		if c.name == "" {
			return c, d.errAt(item, "%s needs a name", w)
		}
		if raw != nil {
			if input != nil {
				return c, d.errAt(raw, "%s has both input and raw_input: give one", w)
			}
			// The arguments text as the model would send it, JSON or
			// not: see docs/scenarios.md.
			return c, nil
		}
		var b jsonBuilder
		if input == nil {
			b.literal("{}")
		} else {
			rn, _, err := d.resolve(input)
			if err != nil {
				return c, err
			}
			switch rn.(type) {
			case *ast.MappingNode, *ast.MappingValueNode, *ast.NullNode:
			default:
				return c, d.errAt(rn, "%s.input must be a mapping (a JSON object), not %s", w, nodeKind(rn))
			}
			if err := d.jsonValue(&b, input, w+".input", 0); err != nil {
				return c, err
			}
		}
		c.input = b.done()
		return c, nil
	})
}

// jsonValue appends n as compact JSON. Mappings keep their written key
// order; strings may be templates.
func (d *decoder) jsonValue(b *jsonBuilder, n ast.Node, what string, depth int) error {
	if depth > maxNesting {
		return d.errAt(n, "%s: nested too deeply", what)
	}
	rn, forceStr, err := d.resolve(n)
	if err != nil {
		return err
	}
	if forceStr {
		if s, ok := scalarText(rn); ok {
			return d.jsonString(b, s, rn, what)
		}
	}
	switch v := rn.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
		return d.jsonObject(b, rn, what, depth)
	case *ast.NullNode:
		if depth == 0 {
			b.literal("{}") // `input:` with nothing after it
		} else {
			b.literal("null")
		}
	case *ast.SequenceNode:
		return d.jsonArray(b, v, what, depth)
	case *ast.StringNode, *ast.LiteralNode:
		s, _ := scalarText(rn)
		return d.jsonString(b, s, rn, what)
	case *ast.IntegerNode, *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return d.jsonNumber(b, rn, what)
	case *ast.BoolNode:
		b.buf = strconv.AppendBool(b.buf, v.Value)
	default:
		return d.errAt(rn, "%s: %s cannot be JSON", what, nodeKind(rn))
	}
	return nil
}

// jsonString appends s, the text of the scalar rn, as a JSON string that
// is a template: a static one is written now, any other is rendered
// afresh for each reply.
func (d *decoder) jsonString(b *jsonBuilder, s string, rn ast.Node, what string) error {
	t, err := d.tmplOf(s, rn, what)
	if err != nil {
		return err
	}
	b.str(t)
	return nil
}

// jsonObject appends the mapping rn as a JSON object, its keys in the
// order they were written, so the arguments read as the author wrote them.
func (d *decoder) jsonObject(b *jsonBuilder, rn ast.Node, what string, depth int) error {
	entries, err := d.mapping(rn, what, depth)
	if err != nil {
		return err
	}
	b.literal("{")
	for i, e := range entries {
		if i > 0 {
			b.literal(",")
		}
		b.buf = appendJSONString(b.buf, e.key)
		b.literal(":")
		if err := d.jsonValue(b, e.val, what+"."+e.key, depth+1); err != nil {
			return err
		}
	}
	b.literal("}")
	return nil
}

// jsonArray appends the sequence v as a JSON array; errors name the
// item by its index.
func (d *decoder) jsonArray(b *jsonBuilder, v *ast.SequenceNode, what string, depth int) error {
	b.literal("[")
	for i, item := range v.Values {
		if i > 0 {
			b.literal(",")
		}
		if err := d.jsonValue(b, item, fmt.Sprintf("%s[%d]", what, i), depth+1); err != nil {
			return err
		}
	}
	b.literal("]")
	return nil
}

// jsonNumber appends the number rn, refusing what YAML can say and JSON
// cannot (infinities, NaN) and an integer the YAML parser could not read.
func (d *decoder) jsonNumber(b *jsonBuilder, rn ast.Node, what string) error {
	switch v := rn.(type) {
	case *ast.IntegerNode:
		switch x := v.Value.(type) {
		case int64:
			b.buf = strconv.AppendInt(b.buf, x, 10)
		case uint64:
			b.buf = strconv.AppendUint(b.buf, x, 10)
		default:
			return d.errAt(rn, "%s: unreadable integer %s", what, v.GetToken().Value)
		}
	case *ast.FloatNode:
		if math.IsInf(v.Value, 0) || math.IsNaN(v.Value) {
			return d.errAt(rn, "%s: JSON has no infinity or NaN", what)
		}
		b.buf = strconv.AppendFloat(b.buf, v.Value, 'g', -1, 64)
	default: // *ast.InfinityNode, *ast.NanNode
		return d.errAt(rn, "%s: JSON has no infinity or NaN", what)
	}
	return nil
}

const matchFields = "system, last_user, tool_result, tool_error, turn, tools, model"

func (d *decoder) matcher(n ast.Node, what string) (matcher, error) {
	var m matcher
	entries, err := d.mapping(n, what, 0)
	if err != nil {
		return m, err
	}
	for _, e := range entries {
		w := what + "." + e.key
		switch e.key {
		case "system":
			m.system, err = d.regexp(e.val, w)
		case "last_user":
			m.lastUser, err = d.regexp(e.val, w)
		case "tool_result":
			m.toolResult, err = d.regexp(e.val, w)
		case "model":
			m.model, err = d.regexp(e.val, w)
		case "tool_error":
			var b bool
			if b, err = d.bool(e.val, w); err == nil {
				m.toolError = -1
				if b {
					m.toolError = 1
				}
			}
		case "turn":
			m.turnLo, m.turnHi, err = d.turn(e.val, w)
		case "tools":
			var items []ast.Node
			if items, err = d.list(e.val, w); err == nil {
				for _, item := range items {
					var name string
					if name, err = d.str(item, w); err != nil {
						break
					}
					if name == "" {
						err = d.errAt(item, "%s: empty tool name", w)
						break
					}
					m.tools = append(m.tools, name)
				}
			}
		default:
			err = d.unknown(e, what, matchFields)
		}
		if err != nil {
			return m, err
		}
	}
	return m, nil
}

// turn decodes 3, "3", "2-4" or "3-" (3 and later).
func (d *decoder) turn(n ast.Node, what string) (lo, hi int, err error) {
	rn, _, err := d.resolve(n)
	if err != nil {
		return 0, 0, err
	}
	bad := func() (int, int, error) {
		return 0, 0, d.errAt(rn, `%s must be a turn number (1 or more) or a range such as "2-4" or "3-"`, what)
	}
	switch v := rn.(type) {
	case *ast.IntegerNode:
		i, ok := intValue(v)
		if !ok || i < 1 || i > math.MaxInt32 {
			return bad()
		}
		return int(i), int(i), nil
	case *ast.StringNode:
		a, b, isRange := strings.Cut(strings.TrimSpace(v.Value), "-")
		lo, err := strconv.Atoi(strings.TrimSpace(a))
		if err != nil || lo < 1 {
			return bad()
		}
		if !isRange {
			return lo, lo, nil
		}
		if strings.TrimSpace(b) == "" {
			return lo, 0, nil
		}
		hi, err := strconv.Atoi(strings.TrimSpace(b))
		if err != nil || hi < lo {
			return bad()
		}
		return lo, hi, nil
	}
	return bad()
}
