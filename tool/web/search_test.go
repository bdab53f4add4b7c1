package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/tool"
	"github.com/deputy-run/deputy/tool/web"
)

// searxng is a SearXNG-shaped server under a path prefix, as instances are
// often mounted. It answers only the JSON API.
func searxng(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/searx/search" || r.URL.Query().Get("format") != "json" {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		q := r.URL.Query().Get("q")
		switch q {
		case "forbidden":
			http.Error(w, "format not allowed", http.StatusForbidden)
			return
		case "garbage":
			fmt.Fprint(w, "<html>")
			return
		}
		type result struct {
			Title   string `json:"title"`
			URL     string `json:"url"`
			Content string `json:"content"`
		}
		var res []result
		if q != "nothing" {
			res = []result{
				{"Go  1.26\nrelease", "https://go.dev/doc/go1.26", "What's   new in\nGo 1.26 for " + q},
				{"No URL", "", "dropped"},
				{"Long", "https://x.example/long", strings.Repeat("é", 400)},
				{"Third", "https://x.example/3", ""},
			}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"query": q, "results": res, "number_of_results": len(res)})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func search(t *testing.T, set *tool.Set, q string) (string, bool) {
	t.Helper()
	raw, _ := json.Marshal(map[string]any{"query": q})
	return set.Call(context.Background(), "web_search", raw)
}

func TestSearchSearXNG(t *testing.T) {
	t.Parallel()
	srv := searxng(t)
	s, err := web.NewSearXNG(srv.URL+"/searx/", nil)
	if err != nil {
		t.Fatal(err)
	}
	set := tool.MustSet(web.NewSearch(web.SearchConfig{Searcher: s}))

	out, isErr := search(t, set, "go  release\nnotes")
	want := "1. Go 1.26 release\n   https://go.dev/doc/go1.26\n   What's new in Go 1.26 for go release notes\n" +
		"2. Long\n   https://x.example/long\n   " + strings.Repeat("é", 300) + "…\n" +
		"3. Third\n   https://x.example/3\n"
	if isErr || out != want {
		t.Errorf("got (err=%v)\n%s\nwant\n%s", isErr, out, want)
	}

	tests := []struct {
		q, want string
		isErr   bool
	}{
		{"nothing", `no results for "nothing"`, false},
		{"forbidden", "HTTP 403 Forbidden (is the json format enabled", true},
		{"garbage", "bad JSON", true},
		{"   ", "the query is empty", true},
		{"", "invalid arguments for web_search", true},
	}
	for _, tc := range tests {
		out, isErr := search(t, set, tc.q)
		if isErr != tc.isErr || !strings.Contains(out, tc.want) {
			t.Errorf("%q: got %q (err=%v), want %q", tc.q, out, isErr, tc.want)
		}
	}
}

func TestSearchMaxResultsAndNoBackend(t *testing.T) {
	t.Parallel()
	srv := searxng(t)
	s, _ := web.NewSearXNG(srv.URL+"/searx", nil)
	set := tool.MustSet(web.NewSearch(web.SearchConfig{Searcher: s, MaxResults: 1}))
	out, _ := search(t, set, "x")
	if strings.Count(out, "https://") != 1 {
		t.Errorf("MaxResults 1: %q", out)
	}
	if tl := web.NewSearch(web.SearchConfig{}); tl != nil {
		t.Errorf("a search tool without a backend: %v", tl)
	}
	for _, bad := range []string{"", "searx.local", "ftp://x", "http://"} {
		if _, err := web.NewSearXNG(bad, nil); err == nil {
			t.Errorf("NewSearXNG(%q) accepted", bad)
		}
	}
}

func TestSearchErrorsHideCredentials(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	defer srv.Close()
	u := strings.Replace(srv.URL, "http://", "http://user:hunter2@", 1) + "/?token=hunter2"
	s, err := web.NewSearXNG(u, nil)
	if err != nil {
		t.Fatal(err)
	}
	set := tool.MustSet(web.NewSearch(web.SearchConfig{Searcher: s}))
	out, isErr := search(t, set, "x")
	if !isErr || strings.Contains(out, "hunter2") || !strings.Contains(out, "HTTP 500") {
		t.Errorf("got %q", out)
	}
}

// stuckSearcher blocks until its context ends.
type stuckSearcher struct{ started chan struct{} }

func (s stuckSearcher) Search(ctx context.Context, _ string) ([]web.Result, error) {
	close(s.started)
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestSearchTimeoutUsesClock(t *testing.T) {
	t.Parallel()
	fc := clock.NewFake(time.Unix(0, 0))
	s := stuckSearcher{make(chan struct{})}
	set := tool.MustSet(web.NewSearch(web.SearchConfig{Searcher: s, Clock: fc, Timeout: 5 * time.Second}))
	done := make(chan string, 1)
	go func() {
		out, _ := search(t, set, "x")
		done <- out
	}()
	<-s.started
	fc.Advance(5 * time.Second)
	select {
	case out := <-done:
		if out != "web search timed out after 5s" {
			t.Errorf("got %q", out)
		}
	case <-time.After(failAfter):
		t.Fatal("not stopped")
	}
}

// The caller's cancellation, even one whose cause is a clock timeout of
// its own, is reported as a cancellation, not as the tool's timeout; and
// the tool's timer is stopped when it returns.
func TestSearchCancelledByCaller(t *testing.T) {
	t.Parallel()
	for _, cause := range []error{context.Canceled, clock.ErrTimeout} {
		fc := clock.NewFake(time.Unix(0, 0))
		s := stuckSearcher{make(chan struct{})}
		set := tool.MustSet(web.NewSearch(web.SearchConfig{Searcher: s, Clock: fc, Timeout: 5 * time.Second}))
		ctx, cancel := context.WithCancelCause(context.Background())
		done := make(chan string, 1)
		go func() {
			raw, _ := json.Marshal(map[string]any{"query": "x"})
			out, _ := set.Call(ctx, "web_search", raw)
			done <- out
		}()
		<-s.started
		cancel(cause)
		select {
		case out := <-done:
			if out != "web search cancelled" {
				t.Errorf("cause %v: got %q", cause, out)
			}
		case <-time.After(failAfter):
			t.Fatal("not stopped")
		}
		if n := fc.Pending(); n != 0 {
			t.Errorf("cause %v: %d timers left armed", cause, n)
		}
	}
}

type failingSearcher struct{}

func (failingSearcher) Search(context.Context, string) ([]web.Result, error) {
	return nil, errors.New("backend down")
}

func TestSearchBackendError(t *testing.T) {
	t.Parallel()
	set := tool.MustSet(web.NewSearch(web.SearchConfig{Searcher: failingSearcher{}}))
	if out, isErr := search(t, set, "x"); !isErr || out != "web search failed: backend down" {
		t.Errorf("got %q", out)
	}
}
