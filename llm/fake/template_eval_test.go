package fake

import (
	"strings"
	"sync"
	"testing"
	"text/template"
)

func TestTemplateUnsupportedBuiltinsRefused(t *testing.T) {
	t.Parallel()
	for _, name := range unsupportedBuiltins {
		// On the template's second line, fifth column, in a scenario's
		// second rule.
		src := "rules:\n  - text: hi\n  - text: \"a\\nb {{" + name + " .Task}}\"\n"
		_, err := ParseScenario([]byte(src), "t.yaml")
		want := `t.yaml:3:11: rules[1].text: rules[1].text:2:5: function "` + name + `" is not supported in scenario templates (they have: add, and, eq, find, ge, grep, gt, hasPrefix, index, json, le, len, lines, lorem, lt, ne, not, or, printf, truncate)`
		if err == nil || err.Error() != want {
			t.Errorf("%s:\n got %v\nwant %s", name, err, want)
		}
	}
	// In a {{define}}d body and as an argument too.
	for _, src := range []string{`{{define "x"}}{{slice .}}{{end}}`, `{{len (print 1)}}`, `{{(call).X}}`} {
		if _, err := newTmpl(src, "text", "t.yaml:1"); err == nil || !strings.Contains(err.Error(), "is not supported in scenario templates") {
			t.Errorf("%s: %v", src, err)
		}
	}
}

// TestTemplateErrorsMatchTextTemplate: the common execution errors read as
// text/template wrote them, position and all.
func TestTemplateErrorsMatchTextTemplate(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		`{{index .ToolResults 3}}`, `{{grep "(" .Task}}`, `{{lorem .Task}}`, `{{with $}}{{.Nope}}{{end}}`, `{{lorem 1 2}}`,
		`{{.Result}}`, `{{eq 1 "a"}}`, `{{lt . 1}}`, `{{len 3}}`, `{{.Task.X}}`, `{{range .Task}}{{end}}`, `{{template "x"}}`,
		"a\nb{{\n lorem -1}}", `{{$x := 1}}{{$x 2}}`, `{{nil}}`, `{{lorem nil}}`, `{{.Turn 1}}`, `{{$x = 1}}`,
		`{{define "d"}}{{add . 1}}{{end}}{{template "d" "s"}}`,
	} {
		ours, err := newTmpl(src, "text", "t.yaml:1")
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		std := template.Must(template.New("text").Funcs(stdFuncs).Option("missingkey=error").Parse(src))
		var a, b limitedBuilder
		oErr, sErr := ours.execute(&a, "text", diffData()), std.Execute(&b, diffData())
		if oErr == nil || sErr == nil || oErr.Error() != templateErr(sErr).Error() {
			t.Errorf("%s:\n fake:          %v\n text/template: %v", src, oErr, sErr)
		}
	}
}

// TestTemplateConcurrentRenders: a loaded template is shared by every
// request; rendering only reads it.
func TestTemplateConcurrentRenders(t *testing.T) {
	t.Parallel()
	tt, err := newTmpl(`{{$n := 0}}{{range $i, $r := .ToolResults}}{{$n = add $n (len $r)}}{{end}}{{define "x"}}[{{.}}]{{end}}{{template "x" $n}}{{.Result "glob" | lines}}`, "text", "t.yaml:1")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				if got := tt.render(diffData()); got != "[5]2" {
					t.Errorf("%q", got)
					return
				}
			}
		})
	}
	wg.Wait()
}
