// Package yamlpos is what deputy's YAML decoders share on goccy/go-yaml's
// AST: deputy.yaml and agent front matter (agentdef) and fake LLM scenarios
// (llm/fake). They decode from the AST rather than into structs so that
// every problem names the line (and column) it is on; this package holds the
// pieces of that which they would otherwise each write: parsing that cannot
// take the process down, the position of a node and of a parse error, a
// mapping's entries, and walking a tree (counting its aliases).
//
// What stays with each decoder, on purpose: its error type and wording
// (agentdef's Issue is file:line and goes into the API's JSON; a scenario's
// error is file:line:column), and how strictly it reads values (front matter
// is read the lenient way Claude Code reads it, deputy.yaml and scenarios
// strictly, scenarios with anchors, aliases and merge keys). Those differ
// because their files do, and their tests pin the messages.
package yamlpos

import (
	"errors"
	"fmt"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// Parse tokenizes and parses src. check, when not nil, sees the tokens
// before the parser does and may refuse them: goccy's parser takes time
// quadratic in some shapes of input, which a caller bounding them must catch
// first. A panic inside the third-party lexer or parser on some odd input
// becomes an error like any other bad input: these files come from users
// and the API, and a server must not die of one.
func Parse(src []byte, check func(token.Tokens) error) (f *ast.File, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, err = nil, fmt.Errorf("YAML parser failed: %v", r)
		}
	}()
	tokens := lexer.Tokenize(string(src))
	if check != nil {
		if err := check(tokens); err != nil {
			return nil, err
		}
	}
	return parser.Parse(tokens, 0)
}

// Pos is a place in a YAML file, both counted from 1; zero when unknown.
type Pos struct{ Line, Column int }

// OfToken is where tk is.
func OfToken(tk *token.Token) Pos {
	if tk == nil || tk.Position == nil {
		return Pos{}
	}
	return Pos{Line: tk.Position.Line, Column: tk.Position.Column}
}

// Of is where n starts.
func Of(n ast.Node) Pos {
	if n == nil {
		return Pos{}
	}
	return OfToken(n.GetToken())
}

// OfError is where a goccy error says the problem is, with its message
// without the position and source excerpt goccy's Error() adds. Any other
// error has no position and its own text.
func OfError(err error) (Pos, string) {
	var ye yaml.Error
	if errors.As(err, &ye) {
		return OfToken(ye.GetToken()), ye.GetMessage()
	}
	return Pos{}, err.Error()
}

// Pairs is a mapping's entries in the order written; ok is false when n is
// not a mapping. goccy represents a mapping of one entry as a bare
// MappingValueNode, which is why a decoder cannot just type-assert
// *ast.MappingNode.
func Pairs(n ast.Node) (pairs []*ast.MappingValueNode, ok bool) {
	switch m := n.(type) {
	case *ast.MappingNode:
		return m.Values, true
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{m}, true
	}
	return nil, false
}

// Key is an entry's key as the user meant it: a quoted key's text without
// its quotes ("openai:gpt-5" needs them, a colon being YAML's), where the
// node's String() keeps them.
func Key(kv *ast.MappingValueNode) string {
	if kv == nil || kv.Key == nil {
		return ""
	}
	if tk := kv.Key.GetToken(); tk != nil && (tk.Type == token.DoubleQuoteType || tk.Type == token.SingleQuoteType) {
		return tk.Value
	}
	return kv.Key.String()
}

// Walk calls fn on n and every node under it. Unlike goccy's own helpers
// (FilterFile panics on them, as FuzzParseDefinition found) it passes over
// the nil nodes some inputs leave in the tree.
func Walk(n ast.Node, fn func(ast.Node)) {
	if n != nil {
		ast.Walk(visitor(fn), n)
	}
}

type visitor func(ast.Node)

func (v visitor) Visit(n ast.Node) ast.Visitor {
	if n == nil {
		return nil
	}
	v(n)
	return v
}

// CountAliases is the number of aliases (*name) in f, for a decoder that
// refuses them or bounds them against a "billion laughs" file.
func CountAliases(f *ast.File) int {
	n := 0
	for _, d := range f.Docs {
		if d != nil {
			Walk(d, func(x ast.Node) {
				if x.Type() == ast.AliasType {
					n++
				}
			})
		}
	}
	return n
}
