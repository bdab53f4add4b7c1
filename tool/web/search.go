package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/tool"
)

// Result is one search hit.
type Result struct {
	Title   string
	URL     string
	Snippet string
}

// Searcher is a web search backend. Implementations must honour ctx and
// must not put credentials in their errors.
type Searcher interface {
	Search(ctx context.Context, query string) ([]Result, error)
}

// SearchConfig sets up web_search. Zero fields take defaults.
type SearchConfig struct {
	Searcher   Searcher      // the backend; without one there is no tool
	Clock      clock.Clock   // times the timeout (clock.Real)
	Timeout    time.Duration // per search (20 s)
	MaxResults int           // results shown (8)
}

// Search is the web_search tool.
type Search struct {
	cfg SearchConfig
}

// NewSearch returns web_search, or nil when no backend is configured: the
// tool is then simply not offered. It returns the interface, not *Search,
// so that "no tool" is a plain nil and not a typed nil that a []tool.Tool
// would carry as a broken tool.
func NewSearch(cfg SearchConfig) tool.Tool {
	if cfg.Searcher == nil {
		return nil
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 20 * time.Second
	}
	if cfg.MaxResults <= 0 {
		cfg.MaxResults = 8
	}
	return &Search{cfg: cfg}
}

// Spec implements tool.Tool.
func (s *Search) Spec() llm.ToolSpec {
	return llm.ToolSpec{
		Name: "web_search",
		Description: fmt.Sprintf("Search the web. Returns up to %d results, each with its title, URL and a "+
			"snippet. Use web_fetch on a result's URL to read the page.", s.cfg.MaxResults),
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "query": {"type": "string", "minLength": 1, "description": "What to search for, as you would type it into a search engine."}
  },
  "required": ["query"],
  "additionalProperties": false
}`),
	}
}

// ReadOnly implements tool.Tool.
func (s *Search) ReadOnly() bool { return true }

// snippetChars caps one result's snippet.
const snippetChars = 300

// Run implements tool.Tool.
func (s *Search) Run(ctx context.Context, input json.RawMessage) (string, error) {
	in, err := tool.Decode[struct {
		Query string `json:"query"`
	}](input)
	if err != nil {
		return "", err
	}
	q := collapseSpace(in.Query)
	if q == "" {
		return "", errors.New("the query is empty")
	}
	ctx, cancel := clock.WithTimeout(ctx, s.cfg.Clock, s.cfg.Timeout, errTimeout)
	defer cancel()

	results, err := s.cfg.Searcher.Search(ctx, q)
	if err != nil {
		if errors.Is(context.Cause(ctx), errTimeout) {
			return "", fmt.Errorf("web search timed out after %s", s.cfg.Timeout)
		}
		if ctx.Err() != nil { // not our timeout, so the caller's context
			return "", errors.New("web search cancelled")
		}
		return "", fmt.Errorf("web search failed: %v", err)
	}
	if len(results) == 0 {
		return fmt.Sprintf("no results for %q", q), nil
	}
	var out strings.Builder
	for i, r := range results {
		if i == s.cfg.MaxResults {
			break
		}
		fmt.Fprintf(&out, "%d. %s\n   %s\n", i+1, oneLine(r.Title, 200), r.URL)
		if snip := oneLine(r.Snippet, snippetChars); snip != "" {
			fmt.Fprintf(&out, "   %s\n", snip)
		}
	}
	return out.String(), nil
}

// oneLine collapses whitespace and cuts s to n characters.
func oneLine(s string, n int) string {
	s = strings.ToValidUTF8(collapseSpace(s), "\uFFFD")
	if c := cutRunes(s, n); c != s {
		return c + "…"
	}
	return s
}
