package fake

import (
	"reflect"
	"testing"
)

// TestUnknownFieldFinder: the one finder reports the first undeclared key
// in document order, at its full depth, and each wire's formatter renders
// the same path its way.
func TestUnknownFieldFinder(t *testing.T) {
	t.Parallel()
	type item struct {
		OK int `json:"ok"`
	}
	type doc struct {
		Inner *struct {
			Name string `json:"name"`
		} `json:"inner"`
		List []item            `json:"list"`
		Map  map[string][]item `json:"map"`
		Raw  []byte            `json:"raw"`
	}
	typ := reflect.TypeFor[doc]()
	for _, c := range []struct{ body, dotted, bracketed string }{
		{`{"inner":{"name":"x"},"list":[{"ok":1}]}`, "", ""},
		{`{"zz":1,"inner":{"yy":2}}`, "zz", "zz"},
		{`{"inner":{"name":"x","yy":2},"zz":1}`, "inner.yy", "inner.yy"},
		{`{"list":[{"ok":1},{"ok":2,"bad":3}],"zz":1}`, "list.1.bad", "list[1].bad"},
		{`{"map":{"k":[{"ok":1,"":2}]}}`, "map.k.0.", "map.k[0]."},
		{`{"raw":"AAE=","list":[{"ok":1}],"inner":null,"late":true}`, "late", "late"},
	} {
		p := unknownField([]byte(c.body), typ)
		if p.dotted() != c.dotted || p.bracketed() != c.bracketed {
			t.Errorf("%s: dotted %q bracketed %q, want %q %q", c.body, p.dotted(), p.bracketed(), c.dotted, c.bracketed)
		}
	}
}

// TestUnknownFieldPathsOnEachWire: an unknown field inside a nested value
// is named by its whole path on every wire, in the wire's notation and
// words (Responses used to drop the path between the value decoded and
// the field: 'zz' for stream_options.zz, 'text.zz' for text.format.zz).
func TestUnknownFieldPathsOnEachWire(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{})
	user := `{"role":"user","content":"x"}`
	for _, c := range []struct{ path, body, msg, param string }{
		{"/v1/responses", `{"model":"m","input":"x","stream_options":{"include_obfuscation":true,"zz":1}}`, "Unknown parameter: 'stream_options.zz'.", "stream_options.zz"},
		{"/v1/responses", `{"model":"m","input":"x","text":{"format":{"type":"text","zz":1}}}`, "Unknown parameter: 'text.format.zz'.", "text.format.zz"},
		{"/v1/responses", `{"model":"m","zz":1,"input":"x","text":{"yy":1}}`, "Unknown parameter: 'zz'.", "zz"},
		{"/v1/chat/completions", `{"model":"m","messages":[` + user + `,{"role":"user","content":[{"type":"text","text":"x","cache_control":{}}]}]}`, "Unknown parameter: 'messages[1].content[0].cache_control'.", "messages[1].content[0].cache_control"},
		{"/v1/messages", `{"model":"m","max_tokens":5,"messages":[` + user + `,{"role":"assistant","content":"x","foo":1}]}`, "messages.1.foo: Extra inputs are not permitted", ""},
	} {
		r := srvPost(t, url, c.path, c.body)
		e := srvJSON(t, r.body)
		param, _ := srvDig(e, "error", "param").(string)
		if r.status != 400 || srvDig(e, "error", "message") != c.msg || param != c.param {
			t.Errorf("%s %s: %d %s", c.path, c.body, r.status, r.body)
		}
	}
}
