package fake

import (
	"errors"
	"fmt"
)

// The text/template builtins scenario templates have, with text/template's
// semantics over the values that occur here (see template_eval.go). The
// others (call, html, js, print, println, slice, urlquery) are refused when
// a template is loaded: nothing documented or used needs them.

var (
	isOr  = true
	isAnd = false
)

var templateBuiltins = map[string]*templateFunc{
	// and returns its first false argument, or the last; or its first true
	// one, or the last. Both stop evaluating there.
	"and": {params: []argKind{argAny, argAny}, variadic: true, shortCircuit: &isAnd},
	"or":  {params: []argKind{argAny, argAny}, variadic: true, shortCircuit: &isOr},
	"not": {params: []argKind{argAny}, call: func(_ *TemplateData, a []any) (any, error) { return !truth(a[0]), nil }},
	"len": {params: []argKind{argAny}, call: func(_ *TemplateData, a []any) (any, error) { return length(a[0]) }},
	"index": {params: []argKind{argAny, argAny}, variadic: true, call: func(_ *TemplateData, a []any) (any, error) {
		return index(a[0], a[1:])
	}},
	"printf": {params: []argKind{argString, argAny}, variadic: true, call: func(_ *TemplateData, a []any) (any, error) {
		return fmt.Sprintf(a[0].(string), a[1:]...), nil
	}},
	"eq": {params: []argKind{argAny, argAny}, variadic: true, call: func(_ *TemplateData, a []any) (any, error) {
		return eq(a[0], a[1:]...)
	}},
	"ne": comparison(func(a, b any) (bool, error) { equal, err := eq(a, b); return !equal, err }),
	"lt": comparison(lt),
	"le": comparison(le),
	"gt": comparison(func(a, b any) (bool, error) { lessOrEqual, err := le(a, b); return !lessOrEqual && err == nil, err }),
	"ge": comparison(func(a, b any) (bool, error) { less, err := lt(a, b); return !less && err == nil, err }),
}

// unsupportedBuiltins are text/template's other builtins: the parser is told
// they exist so a template using one gets an error saying it is not
// supported here rather than that it does not exist.
var unsupportedBuiltins = []string{"call", "html", "js", "print", "println", "slice", "urlquery"}

func comparison(f func(a, b any) (bool, error)) *templateFunc {
	return &templateFunc{params: []argKind{argAny, argAny}, call: func(_ *TemplateData, a []any) (any, error) {
		return f(a[0], a[1])
	}}
}

func length(v any) (int, error) {
	switch v := v.(type) {
	case string:
		return len(v), nil
	case []string:
		return len(v), nil
	case nil:
		return 0, errors.New("len of nil")
	case *TemplateData:
		if v == nil {
			return 0, errors.New("len of nil pointer")
		}
		return 0, fmt.Errorf("len of type %T", *v)
	}
	return 0, fmt.Errorf("len of type %T", v)
}

// index is item[i][j]...: an element of a []string, a byte of a string.
func index(item any, indexes []any) (any, error) {
	if item == nil {
		return nil, errors.New("index of untyped nil")
	}
	for _, i := range indexes {
		switch v := item.(type) {
		case []string:
			x, err := indexArg(i, len(v))
			if err != nil {
				return nil, err
			}
			item = v[x]
		case string:
			x, err := indexArg(i, len(v))
			if err != nil {
				return nil, err
			}
			item = v[x]
		case *TemplateData:
			if v == nil {
				return nil, errors.New("index of nil pointer")
			}
			return nil, fmt.Errorf("can't index item of type %T", *v)
		default:
			return nil, fmt.Errorf("can't index item of type %T", v)
		}
	}
	return item, nil
}

func indexArg(i any, n int) (int, error) {
	var x int
	switch i := i.(type) {
	case int:
		x = i
	case uint8:
		x = int(i)
	case nil:
		return 0, errors.New("cannot index slice/array with nil")
	default:
		return 0, fmt.Errorf("cannot index slice/array with type %T", i)
	}
	if x < 0 || x >= n {
		return 0, fmt.Errorf("index out of range: %d", x)
	}
	return x, nil
}

// basicKind groups the values that compare by value. Values of different
// kinds do not compare, except signed with unsigned integers.
type basicKind uint8

const (
	otherKind basicKind = iota // nil, a pointer, a slice
	boolKind
	complexKind
	intKind
	floatKind
	stringKind
	uintKind
)

func kindOf(v any) basicKind {
	switch v.(type) {
	case bool:
		return boolKind
	case complex128:
		return complexKind
	case int:
		return intKind
	case float64:
		return floatKind
	case string:
		return stringKind
	case uint8:
		return uintKind
	}
	return otherKind
}

var errBadComparisonType = errors.New("invalid type for comparison")

// eq is a == b || a == c || ...
func eq(a any, bs ...any) (bool, error) {
	if len(bs) == 0 {
		return false, errors.New("missing argument for comparison")
	}
	ka := kindOf(a)
	for _, b := range bs {
		kb := kindOf(b)
		var truth bool
		switch {
		case ka == intKind && kb == uintKind:
			truth = a.(int) >= 0 && a.(int) == int(b.(uint8))
		case ka == uintKind && kb == intKind:
			truth = b.(int) >= 0 && int(a.(uint8)) == b.(int)
		case ka != kb:
			if a != nil && b != nil {
				return false, fmt.Errorf("incompatible types for comparison: %T and %T", a, b)
			}
		case ka != otherKind:
			truth = a == b
		default:
			var err error
			if truth, err = eqOther(a, b); err != nil {
				return false, err
			}
		}
		if truth {
			return true, nil
		}
	}
	return false, nil
}

// eqOther compares nil, pointers and slices: nil equals nil (a nil pointer
// or slice included), pointers compare by address, non-nil slices not at
// all.
func eqOther(a, b any) (bool, error) {
	_, aPtr := a.(*TemplateData)
	_, bPtr := b.(*TemplateData)
	if a != nil && b != nil && aPtr != bPtr {
		return false, fmt.Errorf("non-comparable types %v: %T, %T: %v", a, a, b, b)
	}
	if isNil(a) || isNil(b) {
		return isNil(a) == isNil(b), nil
	}
	if !bPtr {
		return false, fmt.Errorf("non-comparable type %v: %T", b, b)
	}
	return a == b, nil
}

func isNil(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case *TemplateData:
		return v == nil
	case []string:
		return v == nil
	}
	return false
}

// lt is a < b, for numbers and strings.
func lt(a, b any) (bool, error) {
	ka, kb := kindOf(a), kindOf(b)
	switch {
	case ka == otherKind || kb == otherKind:
		return false, errBadComparisonType
	case ka == intKind && kb == uintKind:
		return a.(int) < int(b.(uint8)), nil
	case ka == uintKind && kb == intKind:
		return int(a.(uint8)) < b.(int), nil
	case ka != kb:
		return false, fmt.Errorf("incompatible types for comparison: %T and %T", a, b)
	}
	switch a := a.(type) {
	case int:
		return a < b.(int), nil
	case uint8:
		return a < b.(uint8), nil
	case float64:
		return a < b.(float64), nil
	case string:
		return a < b.(string), nil
	}
	return false, errBadComparisonType // bool, complex
}

// le is a < b || a == b.
func le(a, b any) (bool, error) {
	less, err := lt(a, b)
	if less || err != nil {
		return less, err
	}
	return eq(a, b)
}
