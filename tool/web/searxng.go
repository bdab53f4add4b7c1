package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// SearXNG is a Searcher for a SearXNG instance's JSON API:
// GET {base}/search?q=...&format=json. The instance must allow the json
// format (search.formats in its settings.yml).
type SearXNG struct {
	base   *url.URL
	client *http.Client
}

// maxSearchBody bounds the JSON read from the backend.
const maxSearchBody = 4 << 20

// NewSearXNG returns a client for the instance at baseURL (for example
// http://127.0.0.1:8888 or https://search.example/searx). client may be
// nil. The base URL is the operator's, so no address policy applies to it.
func NewSearXNG(baseURL string, client *http.Client) (*SearXNG, error) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil {
		return nil, fmt.Errorf("search URL: %v", err)
	}
	if err := checkURL(u); err != nil {
		return nil, fmt.Errorf("search URL %s: %v", u.Redacted(), err)
	}
	if client == nil {
		// No keep-alive: searches are rare, and idle connections would
		// keep goroutines alive between them.
		client = &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, DisableKeepAlives: true}}
	}
	return &SearXNG{base: u, client: client}, nil
}

// Search implements Searcher.
func (s *SearXNG) Search(ctx context.Context, query string) ([]Result, error) {
	u := *s.base
	u.Path = strings.TrimSuffix(u.Path, "/") + "/search"
	u.RawPath = ""
	q := u.Query()
	q.Set("q", query)
	q.Set("format", "json")
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	// Errors name the host only: the configured URL may carry a key.
	host := s.base.Host
	resp, err := s.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("search backend %s: %v", host, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		hint := ""
		if resp.StatusCode == http.StatusForbidden {
			hint = " (is the json format enabled in the instance's search.formats?)"
		}
		return nil, fmt.Errorf("search backend %s: HTTP %s%s", host, resp.Status, hint)
	}
	var body struct {
		Results []struct {
			Title   string `json:"title"`
			URL     string `json:"url"`
			Content string `json:"content"`
		} `json:"results"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxSearchBody)).Decode(&body); err != nil {
		return nil, fmt.Errorf("search backend %s: bad JSON: %v", host, err)
	}
	out := make([]Result, 0, len(body.Results))
	for _, r := range body.Results {
		if r.URL == "" {
			continue
		}
		out = append(out, Result{Title: r.Title, URL: r.URL, Snippet: r.Content})
	}
	return out, nil
}
