package web

import (
	"io"
	"net/url"
	"regexp"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// Elements whose content is noise to a reader: code, styling, navigation,
// widgets. Their text is dropped with everything inside them.
var dropped = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Template: true,
	atom.Svg: true, atom.Math: true, atom.Canvas: true, atom.Iframe: true, atom.Object: true,
	atom.Nav: true, atom.Footer: true, atom.Button: true, atom.Select: true,
}

// Void elements have no end tag; dropping one must not swallow the rest.
var void = map[atom.Atom]bool{
	atom.Area: true, atom.Base: true, atom.Br: true, atom.Col: true, atom.Embed: true,
	atom.Hr: true, atom.Img: true, atom.Input: true, atom.Link: true, atom.Meta: true,
	atom.Param: true, atom.Source: true, atom.Track: true, atom.Wbr: true,
}

// Elements that start a new paragraph (a blank line) or a new line.
var (
	paragraph = map[atom.Atom]bool{
		atom.P: true, atom.Pre: true, atom.Blockquote: true, atom.Table: true, atom.Ul: true, atom.Ol: true,
		atom.Dl: true, atom.Figure: true, atom.Section: true, atom.Article: true, atom.Main: true,
		atom.Header: true, atom.Aside: true, atom.Details: true, atom.Form: true, atom.Hr: true,
		atom.H1: true, atom.H2: true, atom.H3: true, atom.H4: true, atom.H5: true, atom.H6: true,
	}
	line = map[atom.Atom]bool{
		atom.Div: true, atom.Br: true, atom.Li: true, atom.Tr: true, atom.Dt: true, atom.Dd: true,
		atom.Summary: true, atom.Figcaption: true, atom.Caption: true, atom.Address: true,
	}
	headingLevel = map[atom.Atom]int{atom.H1: 1, atom.H2: 2, atom.H3: 3, atom.H4: 4, atom.H5: 5, atom.H6: 6}
)

// extractor turns HTML into readable plain text: headings as "# ",
// list items as "- ", links as "text (url)", whitespace collapsed outside
// <pre>, and the noise elements above dropped.
type extractor struct {
	base  *url.URL
	out   strings.Builder
	title strings.Builder

	dropTag   string // the element whose content is being dropped
	dropDepth int    // how many dropTag elements are open
	pre       int    // depth inside <pre>
	inTitle   bool
	space     bool // a space is due before the next word
	brk       int  // line breaks due before the next word: 1 newline, 2 blank line

	href      string // the open link's target, if worth showing
	linkStart int    // out.Len() when the open link's text began
}

// extractText reads an HTML document and returns its title and text.
// base resolves relative links.
func extractText(r io.Reader, base *url.URL) (title, text string) {
	e := &extractor{base: base}
	z := html.NewTokenizer(r)
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			return collapseSpace(e.title.String()), tidy(e.out.String())
		case html.TextToken:
			e.text(string(z.Text()))
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			a := atom.Lookup(name)
			var attrs map[string]string
			for hasAttr {
				var k, v []byte
				k, v, hasAttr = z.TagAttr()
				if attrs == nil {
					attrs = map[string]string{}
				}
				attrs[string(k)] = string(v)
			}
			e.start(string(name), a, attrs, tt == html.SelfClosingTagToken)
		case html.EndTagToken:
			name, _ := z.TagName()
			e.end(string(name), atom.Lookup(name))
		}
	}
}

func (e *extractor) start(name string, a atom.Atom, attrs map[string]string, selfClosing bool) {
	opens := !void[a] && !selfClosing
	if e.dropDepth > 0 {
		if name == e.dropTag && opens {
			e.dropDepth++
		}
		return
	}
	_, hidden := attrs["hidden"]
	if (dropped[a] || hidden || attrs["aria-hidden"] == "true") && opens {
		e.dropTag, e.dropDepth = name, 1
		return
	}
	switch {
	case a == atom.Title:
		e.inTitle = true
	case headingLevel[a] > 0:
		e.breakAt(2)
		e.write(strings.Repeat("#", headingLevel[a]) + " ")
	case a == atom.Li:
		e.breakAt(1)
		e.write("- ")
	case a == atom.Td || a == atom.Th:
		e.space = true
	case paragraph[a]:
		e.breakAt(2)
	case line[a]:
		e.breakAt(1)
	}
	if a == atom.Pre {
		e.pre++
	}
	if a == atom.A {
		e.href, e.linkStart = e.link(attrs["href"]), -1
	}
}

func (e *extractor) end(name string, a atom.Atom) {
	if e.dropDepth > 0 {
		switch {
		case name == e.dropTag:
			e.dropDepth--
		case a == atom.Body || a == atom.Html:
			e.dropDepth = 0 // an element dropped but never closed ends here
		}
		return
	}
	switch {
	case a == atom.Title:
		e.inTitle = false
	case headingLevel[a] > 0 || paragraph[a]:
		e.breakAt(2)
	case line[a]:
		e.breakAt(1)
	}
	if a == atom.Pre && e.pre > 0 {
		e.pre--
	}
	if a == atom.A && e.href != "" {
		if e.linkStart >= 0 && e.out.Len() > e.linkStart {
			e.out.WriteString(" (" + e.href + ")")
		}
		e.href = ""
	}
}

func (e *extractor) text(s string) {
	if e.inTitle {
		e.title.WriteString(s)
		return
	}
	if e.dropDepth > 0 || s == "" {
		return
	}
	if e.pre > 0 {
		e.write(s)
		return
	}
	if strings.TrimSpace(s) == "" {
		e.space = true
		return
	}
	if isSpace(s[0]) {
		e.space = true
	}
	e.write(strings.Join(strings.Fields(s), " "))
	if isSpace(s[len(s)-1]) {
		e.space = true
	}
}

// write adds text, first emitting the breaks or the space that are due.
func (e *extractor) write(s string) {
	if e.out.Len() > 0 {
		switch {
		case e.brk > 0:
			e.out.WriteString(strings.Repeat("\n", e.brk))
		case e.space:
			e.out.WriteByte(' ')
		}
	}
	e.brk, e.space = 0, false
	if e.href != "" && e.linkStart < 0 {
		e.linkStart = e.out.Len()
	}
	e.out.WriteString(s)
}

func (e *extractor) breakAt(n int) {
	if e.pre > 0 {
		return
	}
	e.brk = max(e.brk, n)
}

// link returns the absolute http(s) URL a link points to, or "" for links
// not worth showing (fragments, javascript:, mail).
func (e *extractor) link(href string) string {
	href = strings.TrimSpace(href)
	if href == "" || strings.HasPrefix(href, "#") {
		return ""
	}
	u, err := url.Parse(href)
	if err != nil {
		return ""
	}
	if e.base != nil {
		u = e.base.ResolveReference(u)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return ""
	}
	return u.String()
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\f' }

var (
	trailingSpace = regexp.MustCompile(`[ \t]+\n`)
	manyBreaks    = regexp.MustCompile(`\n{3,}`)
)

// tidy removes trailing blanks and runs of empty lines.
func tidy(s string) string {
	s = trailingSpace.ReplaceAllString(s, "\n")
	s = manyBreaks.ReplaceAllString(s, "\n\n")
	return strings.TrimSpace(s)
}

func collapseSpace(s string) string { return strings.Join(strings.Fields(s), " ") }
