package web

import (
	"net/url"
	"strings"
	"testing"
)

func TestExtractText(t *testing.T) {
	t.Parallel()
	base, _ := url.Parse("https://docs.example/guide/intro.html")
	tests := []struct {
		name, html, title, text string
	}{
		{
			name: "page",
			html: `<!doctype html><html><head><title> The  Guide </title>
<style>body{color:red}</style><script>var secret = "noise";</script></head>
<body><nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<h1>Getting   started</h1>
<p>Install it with
   <code>go get</code>, then <a href="setup.html">set it up</a>.</p>
<ul><li>one</li><li>two <b>bold</b></li></ul>
<h2>Details</h2><div>first</div><div>second<br>third</div>
<footer>© 2026 noise</footer></body></html>`,
			title: "The Guide",
			text: "# Getting started\n\nInstall it with `go get`, then [set it up](https://docs.example/guide/setup.html).\n\n" +
				"- one\n- two **bold**\n\n## Details\n\nfirst\n\nsecond\nthird",
		},
		{
			name: "entities and nbsp",
			html: `<p>a&nbsp;&amp;&nbsp;b &lt;tag&gt; caf&eacute;</p>`,
			text: "a & b &lt;tag&gt; café", // Markdown's escapes: <tag> would be read as HTML
		},
		{
			name: "pre keeps whitespace",
			html: "<p>code:</p><pre>if x {\n    y()\n}</pre><p>after</p>",
			text: "code:\n\n```\nif x {\n    y()\n}\n```\n\nafter",
		},
		{
			name: "links not worth showing",
			html: `<p><a href="#top">top</a> <a href="javascript:go()">js</a> <a href="mailto:a@b">mail</a> <a href="https://x.example/">x</a></p>`,
			text: "top js mail [x](https://x.example/)",
		},
		{
			name: "hidden and nested drops",
			html: `<div hidden><div>gone</div><p>gone too</p></div><p>kept</p><svg><title>icon</title><svg><text>in</text></svg>out-of-inner</svg><p aria-hidden="true">aria</p><p>end</p>`,
			text: "kept\n\nend",
		},
		{
			name: "void element with hidden does not swallow the rest",
			html: `<p>a<input hidden>b<img hidden src=x>c</p>`,
			text: "abc",
		},
		{
			name: "an unclosed nav holds the rest, as a browser parses it",
			html: `<body><p>before</p><nav>menu</body><p>after</p>`,
			text: "before",
		},
		{
			name: "a table is a Markdown table",
			html: `<table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr></table>`,
			text: "| k | v |\n|---|---|\n| a | 1 |",
		},
		{
			name: "broken html",
			html: `<p>unterminated <b>bold <i>it</p><li>item`,
			text: "unterminated **bold *it***\n\n***item***", // the parser reopens <b><i> around the stray <li>
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			title, text := extractText(strings.NewReader(tc.html), base)
			if title != tc.title || text != tc.text {
				t.Errorf("title %q, text:\n%q\nwant title %q, text:\n%q", title, text, tc.title, tc.text)
			}
		})
	}
}

func FuzzExtractText(f *testing.F) {
	f.Add("<p>a<b>b</p>")
	f.Add("<nav><nav></nav>x")
	f.Add("<pre><a href=x>y</a></pre><svg hidden/>")
	f.Fuzz(func(t *testing.T, s string) {
		_, text := extractText(strings.NewReader(s), nil)
		if strings.Contains(text, "\n\n\n") {
			t.Errorf("runs of blank lines left: %q", text)
		}
	})
}
