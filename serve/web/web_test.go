package web

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, path string, hdr ...string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

// Every file is served at its one address with its content type, the
// security headers and a revalidating cache policy; "/" is the page.
func TestServesAssets(t *testing.T) {
	t.Parallel()
	h := Handler()
	for path, ctype := range map[string]string{
		"/":            "text/html; charset=utf-8",
		"/app.js":      "text/javascript; charset=utf-8",
		"/theme.js":    "text/javascript; charset=utf-8",
		"/timeline.js": "text/javascript; charset=utf-8",
		"/app.css":     "text/css; charset=utf-8",
		"/favicon.svg": "image/svg+xml",
	} {
		res := get(t, h, http.MethodGet, path)
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK || len(body) == 0 {
			t.Fatalf("%s: %d, %d bytes", path, res.StatusCode, len(body))
		}
		for k, want := range map[string]string{
			"Content-Type":            ctype,
			"Cache-Control":           "no-cache",
			"Content-Security-Policy": CSP,
			"X-Content-Type-Options":  "nosniff",
			"X-Frame-Options":         "DENY",
			"Referrer-Policy":         "no-referrer",
		} {
			if got := res.Header.Get(k); got != want {
				t.Errorf("%s: %s %q, want %q", path, k, got, want)
			}
		}
		etag := res.Header.Get("ETag")
		if !regexp.MustCompile(`^"[0-9a-f]{16}"$`).MatchString(etag) {
			t.Fatalf("%s: ETag %q", path, etag)
		}
		// A revalidation with the same ETag is a 304 without a body.
		res = get(t, h, http.MethodGet, path, "If-None-Match", etag)
		if res.StatusCode != http.StatusNotModified {
			t.Errorf("%s: If-None-Match: %d", path, res.StatusCode)
		}
		res = get(t, h, http.MethodHead, path)
		if b, _ := io.ReadAll(res.Body); res.StatusCode != http.StatusOK || len(b) != 0 {
			t.Errorf("%s: HEAD: %d with %d bytes", path, res.StatusCode, len(b))
		}
	}
	page := string(mustRead(t, "static/index.html"))
	for _, tag := range []string{`<script src="app.js" defer></script>`, `<script src="timeline.js" defer></script>`} {
		if !strings.Contains(page, tag) {
			t.Errorf("the page does not load %s", tag)
		}
	}
	// The theme is applied before the style sheet, so a dark page never
	// flashes light: not deferred, and ahead of app.css.
	if i, j := strings.Index(page, `<script src="theme.js"></script>`), strings.Index(page, `href="app.css"`); i < 0 || i > j {
		t.Error("the page does not load theme.js (undeferred) before app.css")
	}
}

// Unknown paths are 404, /index.html included (the page is "/"), and
// nothing but GET and HEAD is allowed, each answer with the CSP.
func TestRefuses(t *testing.T) {
	t.Parallel()
	h := Handler()
	for _, path := range []string{"/index.html", "/nope.js", "/static/app.js", "/app.js/", "/../web.go", "/web.go"} {
		res := get(t, h, http.MethodGet, path)
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", path, res.StatusCode)
		}
		if res.Header.Get("Content-Security-Policy") != CSP {
			t.Errorf("%s: no CSP on the 404", path)
		}
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		res := get(t, h, m, "/")
		if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s /: %d, Allow %q", m, res.StatusCode, res.Header.Get("Allow"))
		}
	}
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := fs.ReadFile(static, name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The dashboard stands alone and keeps its promises: nothing from another
// origin, no inline script or style (the CSP would block them and the page
// would break silently), no markup built from strings, and the token is
// never stored or put in a URL by the script.
func TestAssetsSelfContained(t *testing.T) {
	t.Parallel()
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}[/"')]`)
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		// The SVG namespace is a name, not a fetch.
		b := strings.ReplaceAll(string(mustRead(t, p)), "http://www.w3.org/2000/svg", "")
		for _, m := range external.FindAllString(b, -1) {
			t.Errorf("%s refers to another origin: %s", p, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	html := string(mustRead(t, "static/index.html"))
	if regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`).MatchString(html) {
		t.Error("index.html has an inline script")
	}
	for _, bad := range []string{` style=`, `<style`, ` onclick=`, ` onsubmit=`, ` onload=`, `javascript:`} {
		if strings.Contains(html, bad) {
			t.Errorf("index.html has %q, which the CSP blocks", bad)
		}
	}
	if regexp.MustCompile(`<input[^>]*id="token"[^>]*\sname=`).MatchString(html) {
		t.Error("the token field has a name: a form submitted without the script would send it")
	}
	js := string(mustRead(t, "static/app.js"))
	for _, name := range []string{"app.js", "timeline.js", "theme.js"} {
		src := string(mustRead(t, "static/"+name))
		for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
			"new Function", "localStorage", "sessionStorage", "setAttribute('style'", "token=", "?token"} {
			if name == "theme.js" && bad == "localStorage" {
				continue // checked below: the theme's one key
			}
			if strings.Contains(src, bad) {
				t.Errorf("%s uses %q", name, bad)
			}
		}
	}
	// theme.js keeps one thing in storage, the theme's name, under its key.
	theme := string(mustRead(t, "static/theme.js"))
	if uses := regexp.MustCompile(`localStorage\.(\w+)\(([^,)]*)`).FindAllStringSubmatch(theme, -1); len(uses) != 2 {
		t.Errorf("theme.js uses localStorage %d times, want getItem and setItem of its key: %q", len(uses), uses)
	} else {
		for _, u := range uses {
			if (u[1] != "getItem" && u[1] != "setItem") || u[2] != "KEY" {
				t.Errorf("theme.js: localStorage.%s(%s", u[1], u[2])
			}
		}
	}
	// Every id the script looks up exists in the page: a renamed element
	// would otherwise break the dashboard at run time only.
	ids := map[string]bool{}
	for _, m := range regexp.MustCompile(`\sid="([^"]+)"`).FindAllStringSubmatch(html, -1) {
		ids[m[1]] = true
	}
	for _, m := range regexp.MustCompile(`\$\('([^']+)'\)`).FindAllStringSubmatch(js, -1) {
		if !ids[m[1]] {
			t.Errorf("app.js looks up #%s, which index.html does not have", m[1])
		}
	}
}
