package fake

import (
	"errors"
	"fmt"
	"strings"
	"text/template/parse"
)

// This file executes scenario templates: a walk over the trees
// text/template/parse builds, with text/template's semantics for the part
// of the language scenarios use (template_diff_test.go checks the two agree).
//
// Why not text/template itself: its executor looks fields and methods up
// by name through reflect.Value.MethodByName, and once that is reachable
// the linker must keep every exported method of every type in the binary,
// since any could be looked up. deputy links two large SDKs; executing the
// fake's templates with text/template cost the release binary about 20 MB
// (docs/benchmarks.md, "Binary size"). The data a scenario template sees is
// known here (TemplateData and what its functions return), so plain type
// switches do the lookups and the linker can drop unused methods again.
//
// Values are Go values of the few types that occur: nil (text/template's
// invalid value: no data, "<no value>"), *TemplateData, string, int, bool,
// []string, uint8 (index into a string), float64 and complex128 (literals).

// argKind is the Go parameter type of a template function, which is what
// text/template would find by reflection: it decides how a literal argument
// is read and which values are accepted.
type argKind uint8

const (
	// argAny is interface{} (and reflect.Value, for the builtins, which
	// behaves the same): any value, nil included; a number literal gets the
	// type its syntax says (see idealConstant).
	argAny argKind = iota
	argInt
	argString
)

func (k argKind) String() string {
	switch k {
	case argInt:
		return "int"
	case argString:
		return "string"
	}
	return "interface {}"
}

// templateFunc is a function a template may call, or a method of
// TemplateData.
type templateFunc struct {
	// params are the parameters' kinds; when variadic, the last one is the
	// kind of each of the variadic arguments.
	params   []argKind
	variadic bool
	// shortCircuit is set for and (false) and or (true): the arguments are
	// evaluated in order until one's truth is this, which is the result.
	shortCircuit *bool
	// call runs the function on arguments already checked against params,
	// so its type assertions hold. recv is the receiver of a method, nil for
	// a function.
	call func(recv *TemplateData, args []any) (any, error)
}

// maxExecDepth bounds nested {{template}} calls, as text/template does, so
// a template calling itself forever fails instead of exhausting the stack.
const maxExecDepth = 100000

// errBreak and errContinue unwind from {{break}} and {{continue}} to the
// enclosing range. They never leave render.
var (
	errBreak    = errors.New("break")
	errContinue = errors.New("continue")
)

// missingVal is the final argument of the first command of a pipeline: the
// one no earlier command supplied.
type missingType struct{}

var missingVal any = missingType{}

// variable is a template variable such as $ or $x.
type variable struct {
	name  string
	value any
}

// evalState is one execution of one template (a {{template}} call starts
// another, sharing the output).
type evalState struct {
	t     *tmpl
	name  string // of the template executing, for errors
	w     *limitedBuilder
	vars  []variable // a push-down stack, as scopes open and close
	depth int
}

// execute renders the template named name with data d into w.
func (t *tmpl) execute(w *limitedBuilder, name string, d *TemplateData) error {
	s := &evalState{t: t, name: name, w: w, vars: []variable{{"$", d}}}
	return s.walk(d, t.trees[name].Root)
}

// errorf is an execution error, placed and worded as text/template's are:
// "name:line:col: executing "name" at <node>: message".
func (s *evalState) errorf(n parse.Node, format string, args ...any) error {
	location, context := s.t.trees[s.name].ErrorContext(n)
	return fmt.Errorf("%s: executing %q at <%s>: %w", location, s.name, context, fmt.Errorf(format, args...))
}

func (s *evalState) walk(dot any, node parse.Node) error {
	switch n := node.(type) {
	case *parse.ActionNode:
		v, err := s.evalPipeline(dot, n.Pipe)
		if err != nil || len(n.Pipe.Decl) > 0 { // a declaration prints nothing
			return err
		}
		return s.print(v)
	case *parse.BreakNode:
		return errBreak
	case *parse.ContinueNode:
		return errContinue
	case *parse.CommentNode:
	case *parse.IfNode:
		return s.walkIfOrWith(false, dot, &n.BranchNode)
	case *parse.WithNode:
		return s.walkIfOrWith(true, dot, &n.BranchNode)
	case *parse.ListNode:
		for _, c := range n.Nodes {
			if err := s.walk(dot, c); err != nil {
				return err
			}
		}
	case *parse.RangeNode:
		return s.walkRange(dot, n)
	case *parse.TemplateNode:
		return s.walkTemplate(dot, n)
	case *parse.TextNode:
		_, err := s.w.Write(n.Text)
		return err
	default:
		return s.errorf(node, "unknown node: %s", node)
	}
	return nil
}

// print writes v as fmt.Print would, pointers followed, as text/template
// does.
func (s *evalState) print(v any) error {
	var err error
	switch v := v.(type) {
	case nil:
		_, err = s.w.WriteString("<no value>")
	case string:
		_, err = s.w.WriteString(v)
	case *TemplateData:
		if v != nil {
			_, err = fmt.Fprint(s.w, *v)
		} else {
			_, err = fmt.Fprint(s.w, v)
		}
	default:
		_, err = fmt.Fprint(s.w, v)
	}
	return err
}

// walkIfOrWith runs b's list if its pipeline's value is true (with that
// value as dot for with), its else list otherwise. Variables the pipeline
// declares are visible in both and gone after.
func (s *evalState) walkIfOrWith(with bool, dot any, b *parse.BranchNode) error {
	mark := len(s.vars)
	defer s.pop(mark)
	v, err := s.evalPipeline(dot, b.Pipe)
	if err != nil {
		return err
	}
	switch {
	case truth(v) && with:
		return s.walk(v, b.List)
	case truth(v):
		return s.walk(dot, b.List)
	case b.ElseList != nil:
		return s.walk(dot, b.ElseList)
	}
	return nil
}

func (s *evalState) pop(mark int) { s.vars = s.vars[:mark] }

// walkRange iterates over a []string (index, element), an int n (0..n-1)
// or a uint8; nil iterates zero times. A {{break}} anywhere under the range,
// its else list included, ends it, as in text/template.
func (s *evalState) walkRange(dot any, r *parse.RangeNode) error {
	outer := len(s.vars)
	defer s.pop(outer)
	v, err := s.evalPipeline(dot, r.Pipe)
	if err != nil {
		return err
	}
	ran, err := s.rangeOver(r, v)
	if err == nil && !ran && r.ElseList != nil {
		err = s.walk(dot, r.ElseList)
	}
	if err == errBreak {
		return nil
	}
	return err
}

// rangeOver runs r's list once per element of v and reports whether it ran
// at all.
func (s *evalState) rangeOver(r *parse.RangeNode, v any) (bool, error) {
	mark := len(s.vars) // the pipeline's variables are below it
	decl, assign := r.Pipe.Decl, r.Pipe.IsAssign
	one := func(index, elem any) error {
		// Declared variables were pushed by the pipeline, the element on
		// top; assigned ones are set wherever they are.
		switch {
		case len(decl) == 0:
		case !assign:
			s.vars[mark-1].value = elem
			if len(decl) > 1 {
				s.vars[mark-2].value = index
			}
		case len(decl) == 1:
			if err := s.setVar(r, decl[0].Ident[0], elem); err != nil {
				return err
			}
		default:
			if err := s.setVar(r, decl[0].Ident[0], index); err != nil {
				return err
			}
			if err := s.setVar(r, decl[1].Ident[0], elem); err != nil {
				return err
			}
		}
		err := s.walk(elem, r.List)
		s.pop(mark)
		if err == errContinue {
			return nil
		}
		return err
	}
	switch v := v.(type) {
	case []string:
		for i, e := range v {
			if err := one(i, e); err != nil {
				return true, err
			}
		}
		return len(v) > 0, nil
	case int:
		return rangeInt(s, r, v, one)
	case uint8:
		return rangeInt(s, r, v, one)
	case nil:
		return false, nil
	case *TemplateData:
		if v != nil {
			return false, s.errorf(r.Pipe, "range can't iterate over %v", *v)
		}
	}
	return false, s.errorf(r.Pipe, "range can't iterate over %v", v)
}

// rangeInt is range over an integer n: 0..n-1, of n's type, one variable
// at most.
func rangeInt[T int | uint8](s *evalState, r *parse.RangeNode, n T, one func(index, elem any) error) (bool, error) {
	if len(r.Pipe.Decl) > 1 {
		return false, s.errorf(r.Pipe, "can't use %v to iterate over more than one variable", n)
	}
	for i := T(0); i < n; i++ {
		if err := one(nil, i); err != nil {
			return true, err
		}
	}
	return n > 0, nil
}

// walkTemplate runs {{template "name" pipeline}}: the named template with
// the pipeline's value as dot and as $, and no other variables.
func (s *evalState) walkTemplate(dot any, n *parse.TemplateNode) error {
	tree := s.t.trees[n.Name]
	if tree == nil {
		return s.errorf(n, "template %q not defined", n.Name)
	}
	if s.depth == maxExecDepth {
		return s.errorf(n, "exceeded maximum template depth (%v)", maxExecDepth)
	}
	// Variables the pipeline declares persist in the caller.
	v, err := s.evalPipeline(dot, n.Pipe)
	if err != nil {
		return err
	}
	callee := evalState{t: s.t, name: n.Name, w: s.w, vars: []variable{{"$", v}}, depth: s.depth + 1}
	return callee.walk(v, tree.Root)
}

// evalPipeline runs the commands of pipe, each one's value the last
// argument of the next, and declares or assigns its variables.
func (s *evalState) evalPipeline(dot any, pipe *parse.PipeNode) (any, error) {
	if pipe == nil || len(pipe.Cmds) == 0 { // the parser makes no empty pipeline but {{template}}'s
		return nil, nil
	}
	v := missingVal
	for _, cmd := range pipe.Cmds {
		var err error
		if v, err = s.evalCommand(dot, cmd, v); err != nil {
			return nil, err
		}
	}
	for _, d := range pipe.Decl {
		if !pipe.IsAssign {
			s.vars = append(s.vars, variable{d.Ident[0], v})
		} else if err := s.setVar(pipe.Cmds[len(pipe.Cmds)-1], d.Ident[0], v); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// setVar assigns to the innermost variable called name.
func (s *evalState) setVar(n parse.Node, name string, v any) error {
	for i := len(s.vars) - 1; i >= 0; i-- {
		if s.vars[i].name == name {
			s.vars[i].value = v
			return nil
		}
	}
	return s.errorf(n, "undefined variable: %s", name)
}

func (s *evalState) varValue(n parse.Node, name string) (any, error) {
	for i := len(s.vars) - 1; i >= 0; i-- {
		if s.vars[i].name == name {
			return s.vars[i].value, nil
		}
	}
	return nil, s.errorf(n, "undefined variable: %s", name)
}

// evalCommand evaluates one command of a pipeline; final is the previous
// command's value (missingVal for the first).
func (s *evalState) evalCommand(dot any, cmd *parse.CommandNode, final any) (any, error) {
	switch n := cmd.Args[0].(type) {
	case *parse.FieldNode:
		return s.evalFieldChain(dot, dot, n, n.Ident, cmd.Args, final)
	case *parse.ChainNode:
		return s.evalChain(dot, n, cmd.Args, final)
	case *parse.IdentifierNode:
		return s.evalFunction(dot, n, cmd, cmd.Args, final)
	case *parse.VariableNode:
		return s.evalVariable(dot, n, cmd.Args, final)
	}
	if err := s.notAFunction(cmd.Args, final); err != nil {
		return nil, err
	}
	switch n := cmd.Args[0].(type) {
	case *parse.PipeNode:
		return s.evalPipeline(dot, n)
	case *parse.BoolNode:
		return n.True, nil
	case *parse.DotNode:
		return dot, nil
	case *parse.NilNode:
		return nil, s.errorf(n, "nil is not a command")
	case *parse.NumberNode:
		return s.idealConstant(n)
	case *parse.StringNode:
		return n.Text, nil
	}
	return nil, s.errorf(cmd.Args[0], "can't evaluate command %q", cmd.Args[0])
}

func (s *evalState) notAFunction(args []parse.Node, final any) error {
	if len(args) > 1 || final != missingVal {
		return s.errorf(args[0], "can't give argument to non-function %s", args[0])
	}
	return nil
}

// idealConstant is a number literal where no parameter type says what it
// is: its syntax does, as in Go (1 is an int, 1.5 a float64, 1i a
// complex128, 'a' an int).
func (s *evalState) idealConstant(n *parse.NumberNode) (any, error) {
	switch {
	case n.IsComplex:
		return n.Complex128, nil
	case n.IsFloat && !isHexInt(n.Text) && n.Text[0] != '\'' && strings.ContainsAny(n.Text, ".eEpP"):
		return n.Float64, nil
	case n.IsInt:
		i := int(n.Int64)
		if int64(i) != n.Int64 {
			return nil, s.errorf(n, "%s overflows int", n.Text)
		}
		return i, nil
	case n.IsUint:
		return nil, s.errorf(n, "%s overflows int", n.Text)
	}
	return nil, nil
}

func isHexInt(s string) bool {
	return len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && !strings.ContainsAny(s, "pP")
}

// evalChain evaluates (pipeline).Field...: the pipeline, then the fields.
func (s *evalState) evalChain(dot any, chain *parse.ChainNode, args []parse.Node, final any) (any, error) {
	if len(chain.Field) == 0 {
		return nil, s.errorf(chain, "internal error: no fields in evalChainNode")
	}
	if chain.Node.Type() == parse.NodeNil {
		return nil, s.errorf(chain, "indirection through explicit nil in %s", chain)
	}
	recv, err := s.evalArg(dot, argAny, chain.Node)
	if err != nil {
		return nil, err
	}
	return s.evalFieldChain(dot, recv, chain, chain.Field, args, final)
}

// evalVariable evaluates $x or $x.Field...
func (s *evalState) evalVariable(dot any, v *parse.VariableNode, args []parse.Node, final any) (any, error) {
	val, err := s.varValue(v, v.Ident[0])
	switch {
	case err != nil:
		return nil, err
	case len(v.Ident) > 1:
		return s.evalFieldChain(dot, val, v, v.Ident[1:], args, final)
	}
	return val, s.notAFunction(args, final)
}

// evalFieldChain evaluates .X.Y.Z on recv; the last one gets the arguments.
// dot is what the arguments are evaluated with.
func (s *evalState) evalFieldChain(dot, recv any, n parse.Node, ident []string, args []parse.Node, final any) (any, error) {
	for _, name := range ident[:len(ident)-1] {
		var err error
		if recv, err = s.evalField(dot, name, n, nil, missingVal, recv); err != nil {
			return nil, err
		}
	}
	return s.evalField(dot, ident[len(ident)-1], n, args, final, recv)
}

// evalField evaluates .name on recv, which has fields only if it is the
// TemplateData.
func (s *evalState) evalField(dot any, name string, n parse.Node, args []parse.Node, final, recv any) (any, error) {
	if recv == nil {
		// What text/template says with missingkey=error, which the fake
		// used: a field of nothing is an error, not "<no value>".
		return nil, s.errorf(n, "nil data; no entry for key %q", name)
	}
	d, ok := recv.(*TemplateData)
	if !ok {
		return nil, s.errorf(n, "can't evaluate field %s in type %T", name, recv)
	}
	if d == nil {
		return nil, s.errorf(n, "nil pointer evaluating %T.%s", recv, name)
	}
	f, ok := templateFields[name]
	switch {
	case !ok:
		return nil, s.errorf(n, "can't evaluate field %s in type %T", name, recv)
	case f.method != nil:
		return s.evalCall(dot, f.method, d, n, n, name, args, final)
	case len(args) > 1 || final != missingVal:
		return nil, s.errorf(n, "%s has arguments but cannot be invoked as function", name)
	}
	return f.get(d), nil
}

func (s *evalState) evalFunction(dot any, id *parse.IdentifierNode, n parse.Node, args []parse.Node, final any) (any, error) {
	f := templateFuncs[id.Ident]
	if f == nil { // the parse check refused it
		return nil, s.errorf(id, "%q is not a defined function", id.Ident)
	}
	return s.evalCall(dot, f, nil, id, n, id.Ident, args, final)
}

// evalCall calls f (a method of recv if recv is set). args, if not nil,
// starts with the function's own node; final, if not missingVal, is the
// last argument. Errors in the arguments are placed at id, the function's
// name, the error it returns at n, the call, as text/template places them.
func (s *evalState) evalCall(dot any, f *templateFunc, recv *TemplateData, id, n parse.Node, name string, args []parse.Node, final any) (any, error) {
	if args != nil {
		args = args[1:]
	}
	numIn := len(args)
	if final != missingVal {
		numIn++
	}
	numFixed := len(args)
	if f.variadic {
		numFixed = len(f.params) - 1
		if numIn < numFixed {
			return nil, s.errorf(id, "wrong number of args for %s: want at least %d got %d", name, numFixed, len(args))
		}
	} else if numIn != len(f.params) {
		return nil, s.errorf(id, "wrong number of args for %s: want %d got %d", name, len(f.params), numIn)
	}
	if f.shortCircuit != nil {
		var v any
		for _, a := range args {
			var err error
			if v, err = s.evalArg(dot, argAny, a); err != nil || truth(v) == *f.shortCircuit {
				return v, err
			}
		}
		if final != missingVal {
			v = final
		}
		return v, nil
	}
	argv := make([]any, numIn)
	i := 0
	for ; i < len(args); i++ {
		k := f.params[min(i, len(f.params)-1)] // past the fixed ones: the variadic kind
		var err error
		if argv[i], err = s.evalArg(dot, k, args[i]); err != nil {
			return nil, err
		}
	}
	if final != missingVal {
		k := f.params[min(numIn, len(f.params))-1]
		var err error
		if argv[i], err = s.validate(id, final, k); err != nil {
			return nil, err
		}
	}
	v, err := f.call(recv, argv)
	if err != nil {
		return nil, s.errorf(n, "error calling %s: %w", name, err)
	}
	return v, nil
}

// evalArg evaluates the argument n for a parameter of kind k.
func (s *evalState) evalArg(dot any, k argKind, n parse.Node) (any, error) {
	var v any
	var err error
	switch a := n.(type) {
	case *parse.DotNode:
		v = dot
	case *parse.NilNode:
		if k != argAny {
			return nil, s.errorf(n, "cannot assign nil to %s", k)
		}
		return nil, nil
	case *parse.FieldNode:
		v, err = s.evalFieldChain(dot, dot, a, a.Ident, nil, missingVal)
	case *parse.VariableNode:
		v, err = s.evalVariable(dot, a, nil, missingVal)
	case *parse.PipeNode:
		v, err = s.evalPipeline(dot, a)
	case *parse.IdentifierNode:
		v, err = s.evalFunction(dot, a, a, nil, missingVal)
	case *parse.ChainNode:
		v, err = s.evalChain(dot, a, nil, missingVal)
	default:
		return s.evalLiteral(k, n)
	}
	if err != nil {
		return nil, err
	}
	return s.validate(n, v, k)
}

// evalLiteral reads a literal argument as its parameter's type.
func (s *evalState) evalLiteral(k argKind, n parse.Node) (any, error) {
	switch k {
	case argInt:
		if n, ok := n.(*parse.NumberNode); ok && n.IsInt {
			return int(n.Int64), nil
		}
		return nil, s.errorf(n, "expected integer; found %s", n)
	case argString:
		if n, ok := n.(*parse.StringNode); ok {
			return n.Text, nil
		}
		return nil, s.errorf(n, "expected string; found %s", n)
	}
	switch n := n.(type) {
	case *parse.BoolNode:
		return n.True, nil
	case *parse.NumberNode:
		return s.idealConstant(n)
	case *parse.StringNode:
		return n.Text, nil
	}
	return nil, s.errorf(n, "can't handle assignment of %s to empty interface argument", n)
}

// validate checks that v may be passed as a parameter of kind k.
func (s *evalState) validate(n parse.Node, v any, k argKind) (any, error) {
	ok := true
	switch k {
	case argInt:
		_, ok = v.(int)
	case argString:
		_, ok = v.(string)
	}
	switch {
	case ok:
		return v, nil
	case v == nil:
		return nil, s.errorf(n, "invalid value; expected %s", k)
	}
	return nil, s.errorf(n, "wrong type for value; expected %s; got %T", k, v)
}

// truth is whether v counts as true in if, with, and, or and not: not the
// zero value of its type (any TemplateData is true).
func truth(v any) bool {
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	case string:
		return v != ""
	case []string:
		return len(v) > 0
	case int:
		return v != 0
	case uint8:
		return v != 0
	case float64:
		return v != 0
	case complex128:
		return v != 0
	case *TemplateData:
		return v != nil
	}
	return true
}
