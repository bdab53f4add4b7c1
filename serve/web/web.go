// Package web is deputy's dashboard: a page, a script and a style sheet,
// written by hand and embedded in the binary, so `deputy serve` needs no
// build step, no CDN and no network to show it.
//
// The page is a client of the HTTP API in docs/api.md and of nothing else.
// It signs in once with POST /api/session and from then on rides on the
// HttpOnly session cookie, EventSource's streams included: the token is
// never put in a URL (where logs and history would keep it), in
// localStorage, or anywhere a script could read it back. The sign-in field
// has no name attribute, so even a page whose script failed to load could
// not submit it as a query string.
//
// Every answer carries a strict Content-Security-Policy: scripts, styles,
// images and connections from this origin only, no inline script, no
// framing. The script builds its DOM with textContent, never innerHTML, so
// a transcript cannot inject markup.
//
// The files are not fingerprinted, so they are served with
// "Cache-Control: no-cache" and an ETag: a browser revalidates on each
// load (a 304 when nothing changed) and a new binary's dashboard is seen at
// once.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// CSP is the Content-Security-Policy of every answer of the dashboard.
// 'self' is enough for the EventSource streams and fetches (same origin);
// nothing inline is allowed, scripts or styles.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; " +
	"frame-ancestors 'none'"

// asset is one embedded file, ready to serve.
type asset struct {
	body  []byte
	ctype string
	etag  string
}

// types are the content types of the files the dashboard has; a file
// with another extension is a build defect caught by the tests.
var types = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

// Handler serves the dashboard: "/" is the page, "/app.js", "/app.css"
// and "/favicon.svg" its parts; any other path is 404. Only GET and HEAD
// are allowed. Mount it at "/" beside the API.
func Handler() http.Handler {
	assets, err := load()
	if err != nil {
		// The files are compiled in and checked by the tests, so this is a
		// build defect, not bad input.
		panic(fmt.Sprintf("web: embedded dashboard: %v", err))
	}
	return handler(assets)
}

func load() (map[string]asset, error) {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		return nil, err
	}
	assets := map[string]asset{}
	err = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ctype, ok := types[path.Ext(p)]
		if !ok {
			return fmt.Errorf("%s: no content type for %q", p, path.Ext(p))
		}
		body, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		assets["/"+p] = asset{body: body, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if _, ok := assets["/index.html"]; !ok {
		return nil, fmt.Errorf("no index.html")
	}
	return assets, nil
}

func handler(assets map[string]asset) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		p := r.URL.Path
		if p == "/" {
			p = "/index.html"
		}
		a, ok := assets[p]
		if !ok || strings.HasSuffix(r.URL.Path, "/index.html") {
			// One address per file: /index.html is "/".
			http.NotFound(w, r)
			return
		}
		h.Set("Content-Type", a.ctype)
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", a.etag)
		// ServeContent answers If-None-Match with 304, HEAD and ranges.
		http.ServeContent(w, r, p, time.Time{}, bytes.NewReader(a.body))
	})
}
