package web

import (
	"net/url"
	"regexp"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// noise are elements that are never a page's content: code, styling,
// media and widgets, and the furniture around the content (navigation,
// asides, footers). They are removed with everything inside them.
var noise = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Template: true, atom.Link: true,
	atom.Svg: true, atom.Math: true, atom.Canvas: true, atom.Iframe: true, atom.Object: true, atom.Embed: true,
	atom.Img: true, atom.Picture: true, atom.Video: true, atom.Audio: true, atom.Source: true,
	atom.Nav: true, atom.Aside: true, atom.Footer: true, atom.Button: true, atom.Select: true, atom.Input: true,
	atom.Dialog: true,
}

// noiseRoles are ARIA landmark and widget roles of the same furniture.
var noiseRoles = map[string]bool{
	"navigation": true, "complementary": true, "contentinfo": true, "banner": true,
	"dialog": true, "alertdialog": true, "search": true, "menu": true, "menubar": true,
}

// consent matches the id or class of a cookie or consent banner, by the
// words such banners use and the consent managers that make most of them
// (OneTrust, Didomi, Quantcast, TrustArc, Usercentrics, Sourcepoint,
// Cookiebot).
var consent = regexp.MustCompile(`(?i)cookie|consent|gdpr|onetrust|didomi|qc-cmp|truste|usercentrics|sp_message|cybot|\bcmp\b`)

// consentChars bounds a consent banner's text: an element matching
// consent with more text than this is an article about cookies, not a
// banner.
const consentChars = 3000

// prune removes the noise from the tree under n: the elements above,
// hidden ones, ARIA furniture, consent banners; and it makes links
// absolute against base, unwrapping those a reader cannot follow
// (javascript:, mailto:, fragments of this page) into their text.
func prune(n *html.Node, base *url.URL) {
	for c := n.FirstChild; c != nil; {
		next := c.NextSibling
		switch {
		case c.Type == html.CommentNode || c.Type == html.ElementNode && (isNoise(c) || isPermalink(c)):
			n.RemoveChild(c)
		case c.Type == html.ElementNode && c.DataAtom == atom.A && !fixLink(c, base):
			// Its children take its place, and are pruned in turn.
			first := c.FirstChild
			for c.FirstChild != nil {
				k := c.FirstChild
				c.RemoveChild(k)
				n.InsertBefore(k, c)
			}
			n.RemoveChild(c)
			if first != nil {
				next = first
			}
		default:
			prune(c, base)
		}
		c = next
	}
}

// isNoise reports whether the element n is furniture, not content.
func isNoise(n *html.Node) bool {
	if noise[n.DataAtom] {
		return true
	}
	var id, class string
	for _, a := range n.Attr {
		switch a.Key {
		case "hidden":
			return true
		case "aria-hidden":
			if a.Val == "true" {
				return true
			}
		case "role":
			if noiseRoles[strings.ToLower(a.Val)] {
				return true
			}
		case "id":
			id = a.Val
		case "class":
			class = a.Val
		}
	}
	if n.DataAtom == atom.Body || n.DataAtom == atom.Html || n.DataAtom == atom.Main || n.DataAtom == atom.Article {
		return false
	}
	if screenReader.MatchString(class) {
		return true
	}
	return (consent.MatchString(id) || consent.MatchString(class)) && len(textOf(n)) < consentChars
}

// screenReader matches the classes of text shown only to screen readers
// and of "skip to content" links: a sighted reader never sees them, and
// in text they read as stray words.
var screenReader = regexp.MustCompile(`(?i)\b(skip-link|skip-to-content|screen-reader-text|sr-only|visually-hidden)\b`)

// isPermalink reports whether n is a heading's permalink, an anchor
// whose text is a mark like ¶ (Sphinx, GitHub, most documentation
// generators): in text it is a stray symbol after every heading.
func isPermalink(n *html.Node) bool {
	if n.DataAtom != atom.A {
		return false
	}
	switch strings.TrimSpace(textOf(n)) {
	case "¶", "#", "§", "🔗", "":
		for _, a := range n.Attr {
			if a.Key == "href" && strings.HasPrefix(a.Val, "#") {
				return true
			}
		}
	}
	return false
}

// fixLink sets the link a's href to its absolute http(s) URL and reports
// whether it has one worth showing.
func fixLink(a *html.Node, base *url.URL) bool {
	for i, at := range a.Attr {
		if at.Key == "href" {
			u := link(at.Val, base)
			a.Attr[i].Val = u
			return u != ""
		}
	}
	return false
}

// link returns the absolute http(s) URL href points to, or "" for links
// not worth showing (fragments, javascript:, mail).
func link(href string, base *url.URL) string {
	href = strings.TrimSpace(href)
	if href == "" || strings.HasPrefix(href, "#") {
		return ""
	}
	u, err := url.Parse(href)
	if err != nil {
		return ""
	}
	u = base.ResolveReference(u)
	if u.Scheme != "http" && u.Scheme != "https" {
		return ""
	}
	return u.String()
}
