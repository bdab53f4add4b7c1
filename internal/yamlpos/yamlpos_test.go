package yamlpos

import (
	"errors"
	"strings"
	"testing"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"
)

func TestParseAndPositions(t *testing.T) {
	t.Parallel()
	f, err := Parse([]byte("a: 1\nb:\n  c: [x, y]\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	top, ok := Pairs(f.Docs[0].Body)
	if !ok || len(top) != 2 {
		t.Fatalf("top: %v %v", top, ok)
	}
	if p := Of(top[1]); p != (Pos{Line: 2, Column: 2}) { // a pair is where its colon is
		t.Errorf("b at %+v", p)
	}
	if p := Of(top[1].Key); p != (Pos{Line: 2, Column: 1}) {
		t.Errorf("key b at %+v", p)
	}
	inner, ok := Pairs(top[1].Value) // one pair: a bare MappingValueNode
	if !ok || len(inner) != 1 || inner[0].Key.String() != "c" {
		t.Fatalf("inner: %v %v", inner, ok)
	}
	if p := Of(inner[0].Value); p.Line != 3 {
		t.Errorf("list at %+v", p)
	}
	if _, ok := Pairs(inner[0].Value); ok {
		t.Error("a list read as a mapping")
	}
	if Of(nil) != (Pos{}) || OfToken(nil) != (Pos{}) {
		t.Error("nothing has a position")
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte("a: 1\nb: [x\n"), nil)
	if err == nil {
		t.Fatal("unclosed list parsed")
	}
	p, msg := OfError(err)
	if p.Line == 0 || msg == "" || strings.Contains(msg, "\n") {
		t.Errorf("error at %+v: %q (from %v)", p, msg, err)
	}
	if p, msg := OfError(errors.New("other")); p != (Pos{}) || msg != "other" {
		t.Errorf("plain error: %+v %q", p, msg)
	}

	refused := errors.New("refused")
	if _, err := Parse([]byte("a: 1"), func(token.Tokens) error { return refused }); err != refused {
		t.Errorf("check's error: %v", err)
	}
	// A panic in what runs on the input is an error, not a crash.
	_, err = Parse([]byte("a: 1"), func(token.Tokens) error { panic("boom") })
	if err == nil || !strings.Contains(err.Error(), "YAML parser failed: boom") {
		t.Errorf("panic: %v", err)
	}
}

func TestWalkAndAliases(t *testing.T) {
	t.Parallel()
	f, err := Parse([]byte("a: &x [1, 2]\nb: *x\nc: [*x, *x]\n---\nd: *y\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := CountAliases(f); n != 4 {
		t.Errorf("%d aliases, want 4 (over both documents)", n)
	}
	anchors := 0
	Walk(f.Docs[0], func(n ast.Node) {
		if n.Type() == ast.AnchorType {
			anchors++
		}
	})
	if anchors != 1 {
		t.Errorf("%d anchors", anchors)
	}
	Walk(nil, func(ast.Node) { t.Error("called on nothing") })
	if n := CountAliases(&ast.File{Docs: []*ast.DocumentNode{nil}}); n != 0 {
		t.Errorf("nil document: %d", n)
	}
}
