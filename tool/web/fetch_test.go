package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/tool"
	"github.com/deputy-run/deputy/tool/web"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const failAfter = 10 * time.Second

func fetch(t *testing.T, set *tool.Set, u string) (string, bool) {
	t.Helper()
	raw, _ := json.Marshal(map[string]any{"url": u})
	return set.Call(context.Background(), "web_fetch", raw)
}

// site is a small web site with the pages the tests need.
func site(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<html><head><title>Doc</title><script>evil()</script></head>
<body><nav>menu</nav><h1>Hello</h1><p>See <a href="/next">next</a>.</p></body></html>`)
	})
	mux.HandleFunc("/text", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, "  plain\n\ttext  \n")
	})
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		fmt.Fprint(w, `{"a": [1, 2]}`)
	})
	mux.HandleFunc("/latin1", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=iso-8859-1")
		w.Write([]byte("caf\xe9"))
	})
	mux.HandleFunc("/png", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte("\x89PNG\r\n\x1a\n\x00\x00"))
	})
	mux.HandleFunc("/sniffed", func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = nil // no header: the body is sniffed
		w.Write([]byte("<!DOCTYPE html><p>sniffed html</p>"))
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, "<h1>Not here</h1>")
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte(strings.Repeat("y", 5000)))
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/page", http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	mux.HandleFunc("/to-file", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
	})
	mux.HandleFunc("/to-metadata", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestFetch(t *testing.T) {
	t.Parallel()
	srv := site(t)
	set := tool.MustSet(web.NewFetch(web.FetchConfig{MaxBytes: 3000, MaxOutput: 1000}))
	tests := []struct {
		path, want string
		isErr      bool
	}{
		{"/page", "URL: " + srv.URL + "/page\nTitle: Doc\n\n# Hello\n\nSee [next](" + srv.URL + "/next).", false},
		{"/redirect", "URL: " + srv.URL + "/page\nTitle: Doc\n", false}, // the final URL is reported
		{"/text", "URL: " + srv.URL + "/text\n\n  plain\n\ttext  \n", false},
		{"/json", `{"a": [1, 2]}`, false},
		{"/latin1", "\n\ncafé", false},
		{"/sniffed", "sniffed html", false},
		{"/png", `content type "image/png" is not text`, true},
		{"/missing", "HTTP 404 Not Found\n# Not here", true},
		{"/big", "\n[text cut at 1000 of 3000 characters]\n[only the first 3000 bytes of the response were read]", false},
		{"/loop", "stopped after 5 redirects", true},
		{"/to-file", `refused redirect to file:///etc/passwd: scheme "file" is not allowed`, true},
		{"/to-metadata", "refused to connect: address 169.254.169.254 is link-local", true},
	}
	for _, tc := range tests {
		out, isErr := fetch(t, set, srv.URL+tc.path)
		if isErr != tc.isErr || !strings.Contains(out, tc.want) {
			t.Errorf("%s: got %q (err=%v), want %q (err=%v)", tc.path, out, isErr, tc.want, tc.isErr)
		}
		if strings.Contains(out, "evil") || strings.Contains(out, "menu") {
			t.Errorf("%s: noise kept: %q", tc.path, out)
		}
	}
}

func TestFetchRefusesBadURLs(t *testing.T) {
	t.Parallel()
	set := tool.MustSet(web.NewFetch(web.FetchConfig{}))
	tests := []struct{ url, want string }{
		{"file:///etc/passwd", `scheme "file" is not allowed`},
		{"ftp://example.com/x", `scheme "ftp" is not allowed`},
		{"gopher://x", `scheme "gopher" is not allowed`},
		{"example.com/page", "not an absolute URL"},
		{"http:///path", "no host"},
		{"http://%zz", "invalid URL"},
		// Refused at dial time, before any packet leaves.
		{"http://169.254.169.254/latest/meta-data/", "address 169.254.169.254 is link-local"},
		{"http://[fe80::1]:80/", "address fe80::1 is link-local"},
		{"http://[::ffff:169.254.169.254]/", "address 169.254.169.254 is link-local"},
		{"http://[::ffff:a9fe:a9fe]/", "address 169.254.169.254 is link-local"},
		{"http://[fd00:ec2::254]/", "address fd00:ec2::254 is a cloud metadata service"},
		// A zone makes netip.Prefix.Contains false; the zone must not
		// smuggle a link-local address past the policy.
		{"http://[fe80::1%25lo]:1/", "address fe80::1 is link-local"},
		{"http://[fe80::a9fe:a9fe%251]:1/", "address fe80::a9fe:a9fe is link-local"},
		{"http://[::ffff:169.254.169.254%25lo]:1/", "address 169.254.169.254 is link-local"},
	}
	for _, tc := range tests {
		out, isErr := fetch(t, set, tc.url)
		if !isErr || !strings.Contains(out, tc.want) {
			t.Errorf("%s: got %q (err=%v), want %q", tc.url, out, isErr, tc.want)
		}
	}
}

// inet_aton spellings of 169.254.169.254 (decimal, octal, short forms)
// pass the URL parser as host names. Go never reads them as addresses:
// its resolver refuses all-digit names without sending a query, and a
// resolver that did read them (getaddrinfo) would hand the dialer
// 169.254.169.254, which the policy refuses. Either way nothing is
// dialed. (Hex forms such as 0xa9fea9fe are ordinary names to Go and
// would go to DNS, so they are not tried here: tests stay off the
// network. Whatever DNS answers is judged at dial time.)
func TestFetchRefusesNumericHostForms(t *testing.T) {
	t.Parallel()
	set := tool.MustSet(web.NewFetch(web.FetchConfig{}))
	for _, host := range []string{"2852039166", "0251.0376.0251.0376", "0251.254.169.254", "169.254.43518", "169.16689662"} {
		u := "http://" + host + "/latest/meta-data/"
		parsed, err := url.Parse(u)
		if err != nil || parsed.Hostname() != host {
			t.Fatalf("%s: the URL parser no longer lets this through (%v); update the test", u, err)
		}
		out, isErr := fetch(t, set, u)
		if !isErr || !(strings.Contains(out, "no such host") || strings.Contains(out, "is link-local")) {
			t.Errorf("%s: got %q (err=%v)", u, out, isErr)
		}
	}
}

// The policy is checked on the dialed address, after DNS: a hostname that
// resolves to a refused address is refused too.
func TestFetchPolicyAppliesAfterDNS(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	port := srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
	set := tool.MustSet(web.NewFetch(web.FetchConfig{AllowAddr: web.PublicOnly}))
	for _, u := range []string{srv.URL, "http://localhost:" + port + "/"} {
		out, isErr := fetch(t, set, u)
		if !isErr || !strings.Contains(out, "is loopback") {
			t.Errorf("%s: got %q (err=%v)", u, out, isErr)
		}
	}
	if hits.Load() != 0 {
		t.Errorf("the server was reached %d times", hits.Load())
	}
}

func TestAddrPolicies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr          string
		dflt, pubOnly bool // allowed?
	}{
		{"93.184.215.14", true, true},
		{"2606:2800:21f:cb07:6820:80da:af6b:8b2c", true, true},
		{"127.0.0.1", true, false},
		{"::1", true, false},
		{"10.1.2.3", true, false},
		{"192.168.0.1", true, false},
		{"100.64.0.1", true, false},
		{"fd12::1", true, false},
		{"0.0.0.0", true, false},
		{"169.254.169.254", false, false},
		{"169.254.0.1", false, false},
		{"fe80::1", false, false},
		{"::ffff:169.254.169.254", false, false},
		{"64:ff9b::a9fe:a9fe", false, false}, // NAT64 of 169.254.169.254
		{"fd00:ec2::254", false, false},
		{"100.100.100.200", false, false},
		// Zoned forms of the addresses above.
		{"fe80::1%lo", false, false},
		{"fe80::1%eth0", false, false},
		{"febf:ffff::1%2", false, false},
		{"::ffff:169.254.169.254%lo", false, false},
		{"64:ff9b::a9fe:a9fe%lo", false, false},
		{"fd00:ec2::254%lo", false, false},
		{"::1%lo", true, false},
		{"fd12::1%lo", true, false},
	}
	for _, tc := range tests {
		a := netip.MustParseAddr(tc.addr)
		if got := web.DefaultPolicy(a) == nil; got != tc.dflt {
			t.Errorf("DefaultPolicy(%s) allowed=%v", a, got)
		}
		if got := web.PublicOnly(a) == nil; got != tc.pubOnly {
			t.Errorf("PublicOnly(%s) allowed=%v", a, got)
		}
	}
}

func TestFetchTimeoutUsesClock(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done() // hang until the client gives up
	}))
	defer srv.Close()
	fc := clock.NewFake(time.Unix(0, 0))
	set := tool.MustSet(web.NewFetch(web.FetchConfig{Clock: fc, Timeout: 30 * time.Second}))
	done := make(chan string, 1)
	go func() {
		out, _ := fetch(t, set, srv.URL)
		done <- out
	}()
	select {
	case <-arrived:
	case <-time.After(failAfter):
		t.Fatal("request never arrived")
	}
	fc.Advance(29 * time.Second)
	select {
	case out := <-done:
		t.Fatalf("returned before the timeout: %q", out)
	default:
	}
	fc.Advance(time.Second)
	select {
	case out := <-done:
		if !strings.Contains(out, "timed out after 30s") {
			t.Errorf("got %q", out)
		}
	case <-time.After(failAfter):
		t.Fatal("timeout did not stop the fetch")
	}
}

func TestFetchCancelledByCaller(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
	}))
	defer srv.Close()
	fc := clock.NewFake(time.Unix(0, 0))
	set := tool.MustSet(web.NewFetch(web.FetchConfig{Clock: fc, Timeout: 30 * time.Second}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan string, 1)
	go func() {
		raw, _ := json.Marshal(map[string]any{"url": srv.URL})
		out, _ := set.Call(ctx, "web_fetch", raw)
		done <- out
	}()
	select {
	case <-arrived:
	case <-time.After(failAfter):
		t.Fatal("request never arrived")
	}
	cancel()
	select {
	case out := <-done:
		if out != "fetch "+srv.URL+": cancelled" {
			t.Errorf("got %q", out)
		}
	case <-time.After(failAfter):
		t.Fatal("cancellation did not stop the fetch")
	}
	if n := fc.Pending(); n != 0 {
		t.Errorf("%d timers left armed", n)
	}
}
