package web

import (
	"io"
	"net/url"
	"regexp"
	"strings"

	"codeberg.org/readeck/go-readability/v2"
	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	mdbase "github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/table"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// extractText reads an HTML document and returns its title and its
// readable text as Markdown: headings, lists, links, tables and code
// blocks kept; navigation, cookie banners, asides and the page's other
// furniture dropped. base resolves relative links.
//
// Three steps, each a maintained library's or deputy's own small part:
// prune removes what is never content (see prune.go); then, when the page
// reads as an article (readability's isProbablyReaderable test), Mozilla's
// Readability algorithm (codeberg.org/readeck/go-readability) keeps its
// main content only, and otherwise the whole pruned body is kept (a short
// page, a reference page of many sections); html-to-markdown
// (github.com/JohannesKaufmann/html-to-markdown/v2, with its table plugin)
// writes the Markdown.
func extractText(r io.Reader, base *url.URL) (title, text string) {
	doc, err := html.Parse(r)
	if err != nil {
		return "", ""
	}
	if base == nil {
		base = &url.URL{} // readability resolves links against it
	}
	if head := find(doc, atom.Head); head != nil {
		title = collapseSpace(textOf(find(head, atom.Title)))
	}
	prune(doc, base)
	content := find(doc, atom.Body)
	if content == nil {
		content = doc
	}
	p := readability.NewParser()
	if p.CheckDocument(doc) {
		if art, err := p.ParseAndMutate(doc, base); err == nil && art.Node != nil {
			content = art.Node
			if title == "" {
				title = collapseSpace(art.Title())
			}
		}
	}
	return title, markdown(content, base)
}

// markdown renders node as Markdown, links made absolute against base,
// no-break spaces as spaces (a model reads them as spaces, and they would
// only keep words apart in search).
// A converter is built per call: it keeps state while converting.
func markdown(node *html.Node, base *url.URL) string {
	conv := converter.NewConverter(converter.WithPlugins(
		mdbase.NewBasePlugin(),
		commonmark.NewCommonmarkPlugin(),
		table.NewTablePlugin(table.WithSkipEmptyRows(true), table.WithHeaderPromotion(true)),
	))
	md, err := conv.ConvertNode(node, converter.WithDomain(base.String()))
	if err != nil {
		return ""
	}
	return tidy(strings.ReplaceAll(string(md), "\u00a0", " "))
}

// find returns the first element a in the tree under n, or nil.
func find(n *html.Node, a atom.Atom) *html.Node {
	if n.Type == html.ElementNode && n.DataAtom == a {
		return n
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if f := find(c, a); f != nil {
			return f
		}
	}
	return nil
}

// textOf is the text under n ("" for nil).
func textOf(n *html.Node) string {
	if n == nil {
		return ""
	}
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}

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
