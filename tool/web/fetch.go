// Package web holds deputy's web tools: web_fetch, which fetches one
// http(s) URL and returns its readable text, and web_search, which asks a
// pluggable search backend (a SearXNG JSON client is included).
package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/net/html/charset"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/tool"
)

// FetchConfig sets up web_fetch. Zero fields take defaults.
type FetchConfig struct {
	Clock        clock.Clock   // times the timeout (clock.Real)
	Timeout      time.Duration // whole fetch, redirects and body included (30 s)
	MaxBytes     int64         // body bytes read at most (2 MiB)
	MaxOutput    int           // characters of text returned at most (40,000)
	MaxRedirects int           // redirects followed (5)
	AllowAddr    AddrPolicy    // which IP addresses may be dialed (DefaultPolicy)
	UserAgent    string        // ("deputy-web-fetch/1")
}

// Fetch is the web_fetch tool.
type Fetch struct {
	cfg    FetchConfig
	client *http.Client
}

// NewFetch returns web_fetch.
func NewFetch(cfg FetchConfig) *Fetch {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 2 << 20
	}
	if cfg.MaxOutput <= 0 {
		cfg.MaxOutput = 40_000
	}
	if cfg.MaxRedirects <= 0 {
		cfg.MaxRedirects = 5
	}
	if cfg.AllowAddr == nil {
		cfg.AllowAddr = DefaultPolicy
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "deputy-web-fetch/1"
	}
	f := &Fetch{cfg: cfg}
	dialer := &net.Dialer{
		Timeout: cfg.Timeout,
		// Control runs after DNS, on the address about to be connected,
		// before any packet is sent: the one place the policy cannot be
		// fooled by a hostname or a redirect.
		Control: func(_, address string, _ syscall.RawConn) error {
			a, err := dialedAddr(address)
			if err != nil {
				return fmt.Errorf("refused to connect to %s: %v", address, err)
			}
			if err := cfg.AllowAddr(a); err != nil {
				return &refusedError{fmt.Sprintf("refused to connect: %v", err)}
			}
			return nil
		},
	}
	f.client = &http.Client{
		Transport: &http.Transport{
			// No proxy: through one, the dialed address would be the
			// proxy's and the policy would check nothing.
			Proxy:               nil,
			DialContext:         dialer.DialContext,
			TLSHandshakeTimeout: cfg.Timeout,
			// One fetch per call: keeping idle connections would only keep
			// goroutines and sockets alive between calls.
			DisableKeepAlives: true,
			ForceAttemptHTTP2: true,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > cfg.MaxRedirects {
				return &refusedError{fmt.Sprintf("stopped after %d redirects", cfg.MaxRedirects)}
			}
			if err := checkURL(req.URL); err != nil {
				return &refusedError{fmt.Sprintf("refused redirect to %s: %v", req.URL.Redacted(), err)}
			}
			return nil
		},
	}
	return f
}

// dialedAddr is the IP address in a dialer's "host:port". The zone is
// dropped: the policy judges the address, and the dialer writes an
// IPv4-mapped address with a zone (from [::ffff:a.b.c.d%lo]) as
// "a.b.c.d%lo", which netip refuses to parse at all.
func dialedAddr(address string) (netip.Addr, error) {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return netip.Addr{}, err
	}
	host, _, _ = strings.Cut(host, "%")
	return netip.ParseAddr(host)
}

// errTimeout is the cause a web tool's own timeout cancels its context
// with, which tells it apart from the caller's cancellation.
var errTimeout = errors.New("web tool timeout")

// refusedError is a policy refusal, reported to the model as is.
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

// Spec implements tool.Tool.
func (f *Fetch) Spec() llm.ToolSpec {
	return llm.ToolSpec{
		Name: "web_fetch",
		Description: fmt.Sprintf("Fetch one web page or file over http or https and return its text. HTML is "+
			"reduced to its readable content as Markdown (an article's main text when the page is one; "+
			"headings, lists, links, tables and code blocks kept; navigation, asides, cookie banners, "+
			"scripts and images dropped); plain text, JSON and XML are returned as they are. Binary content "+
			"(images, PDF, archives) is refused. Redirects are followed (up to %d). At most %d characters "+
			"are returned.", f.cfg.MaxRedirects, f.cfg.MaxOutput),
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "url": {"type": "string", "minLength": 1, "description": "Absolute http:// or https:// URL to fetch."}
  },
  "required": ["url"],
  "additionalProperties": false
}`),
	}
}

// ReadOnly implements tool.Tool: a GET changes nothing deputy owns.
func (f *Fetch) ReadOnly() bool { return true }

// checkURL allows absolute http and https URLs only.
func checkURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		if u.Scheme == "" {
			return errors.New("not an absolute URL (it needs http:// or https://)")
		}
		return fmt.Errorf("scheme %q is not allowed; only http and https", u.Scheme)
	}
	if u.Host == "" {
		return errors.New("the URL has no host")
	}
	return nil
}

// Run implements tool.Tool.
func (f *Fetch) Run(ctx context.Context, input json.RawMessage) (string, error) {
	in, err := tool.Decode[struct {
		URL string `json:"url"`
	}](input)
	if err != nil {
		return "", err
	}
	u, err := parseFetchURL(in.URL)
	if err != nil {
		return "", err
	}

	ctx, cancel := clock.WithTimeout(ctx, f.cfg.Clock, f.cfg.Timeout, errTimeout)
	defer cancel()
	resp, body, cutBody, err := f.get(ctx, u)
	if err != nil {
		return "", f.fetchErr(ctx, u, err)
	}
	final := resp.Request.URL
	title, text, err := pageText(resp, body, u, final)
	if err != nil {
		return "", err
	}
	if resp.StatusCode >= 400 {
		return "", fmt.Errorf("fetch %s: HTTP %s\n%s", u.Redacted(), resp.Status, cutRunes(text, 500))
	}
	return f.render(final, title, text, cutBody), nil
}

// parseFetchURL is the URL the model gave, if web_fetch may fetch it.
func parseFetchURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, fmt.Errorf("invalid URL %q: %v", raw, err)
	}
	if err := checkURL(u); err != nil {
		return nil, fmt.Errorf("cannot fetch %s: %v", u.Redacted(), err)
	}
	return u, nil
}

// get fetches u, redirects followed, and reads at most MaxBytes of the
// body; cut says there was more.
func (f *Fetch) get(ctx context.Context, u *url.URL) (resp *http.Response, body []byte, cut bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, nil, false, err
	}
	req.Header.Set("User-Agent", f.cfg.UserAgent)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.9,*/*;q=0.5")
	resp, err = f.client.Do(req)
	if err != nil {
		return nil, nil, false, err
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(io.LimitReader(resp.Body, f.cfg.MaxBytes+1))
	if err != nil {
		return nil, nil, false, err
	}
	cut = int64(len(body)) > f.cfg.MaxBytes
	if cut {
		body = body[:f.cfg.MaxBytes]
	}
	return resp, body, cut, nil
}

// fetchErr is the error for a fetch of u that failed: a timeout or a
// cancellation says so rather than what it interrupted, a refusal of the
// policy is given as it is, and the rest without url.Error's repetition.
func (f *Fetch) fetchErr(ctx context.Context, u *url.URL, err error) error {
	if errors.Is(context.Cause(ctx), errTimeout) {
		return fmt.Errorf("fetch %s: timed out after %s", u.Redacted(), f.cfg.Timeout)
	}
	if ctx.Err() != nil { // not our timeout, so the caller's context
		return fmt.Errorf("fetch %s: cancelled", u.Redacted())
	}
	var re *refusedError
	if errors.As(err, &re) {
		return fmt.Errorf("fetch %s: %s", u.Redacted(), re.msg)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // url.Error repeats the method and URL
	}
	return fmt.Errorf("fetch %s: %v", u.Redacted(), err)
}

// pageText is the text of the response's body: HTML reduced to readable
// text (and its title; links resolved against final, the URL after
// redirects), other text as it is, in UTF-8. Anything else is refused,
// or reported as the HTTP error it is.
func pageText(resp *http.Response, body []byte, u, final *url.URL) (title, text string, err error) {
	ctype := resp.Header.Get("Content-Type")
	if ctype == "" {
		ctype = http.DetectContentType(body)
	}
	mediaType, _, _ := mime.ParseMediaType(ctype)
	switch {
	case mediaType == "text/html" || mediaType == "application/xhtml+xml":
		title, text = extractText(decoded(body, ctype), final)
		return title, text, nil
	case isText(mediaType):
		b, _ := io.ReadAll(decoded(body, ctype))
		return "", strings.ToValidUTF8(string(b), "\uFFFD"), nil
	}
	if resp.StatusCode >= 400 {
		return "", "", fmt.Errorf("fetch %s: HTTP %s", u.Redacted(), resp.Status)
	}
	return "", "", fmt.Errorf("fetch %s: content type %q is not text; web_fetch returns text only", u.Redacted(), mediaType)
}

// render is web_fetch's result: the final URL, the title, the text cut
// at MaxOutput characters, and notes saying what was cut.
func (f *Fetch) render(final *url.URL, title, text string, cutBody bool) string {
	var out strings.Builder
	fmt.Fprintf(&out, "URL: %s\n", final.Redacted())
	if title != "" {
		fmt.Fprintf(&out, "Title: %s\n", title)
	}
	out.WriteByte('\n')
	n := utf8.RuneCountInString(text)
	out.WriteString(cutRunes(text, f.cfg.MaxOutput))
	if n > f.cfg.MaxOutput {
		fmt.Fprintf(&out, "\n[text cut at %d of %d characters]", f.cfg.MaxOutput, n)
	}
	if cutBody {
		fmt.Fprintf(&out, "\n[only the first %d bytes of the response were read]", f.cfg.MaxBytes)
	}
	return out.String()
}

// decoded converts the body to UTF-8 from the charset the Content-Type
// names (or an HTML <meta> declares); unknown charsets pass unchanged.
func decoded(body []byte, ctype string) io.Reader {
	r, err := charset.NewReader(bytes.NewReader(body), ctype)
	if err != nil {
		return bytes.NewReader(body)
	}
	return r
}

func isText(mediaType string) bool {
	switch {
	case strings.HasPrefix(mediaType, "text/"),
		strings.HasSuffix(mediaType, "+json"), strings.HasSuffix(mediaType, "+xml"):
		return true
	}
	switch mediaType {
	case "application/json", "application/xml", "application/javascript", "application/x-javascript",
		"application/ecmascript", "application/x-yaml", "application/yaml", "application/toml",
		"application/x-sh", "application/sql", "application/graphql":
		return true
	}
	return false
}

// cutRunes keeps at most n characters of s.
func cutRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := 0
	for k := range s {
		if i == n {
			return s[:k]
		}
		i++
	}
	return s
}
