package web

import (
	"flag"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/pages/*.md from the extractor's output")

// Pages written here in the shape of real sites' markup
// (testdata/pages/README.md says which kind each imitates) through
// extractText: the whole output against a golden file, and, so a
// regenerated golden cannot hide a regression, what must be kept and what
// must be dropped, each checked on its own.
func TestExtractPages(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		page, url, title string
		kept, dropped    []string
	}{
		{
			page:  "engineering-blog-post",
			url:   "https://engineering.northwind.example/infrastructure/content-addressed-build-cache",
			title: "Rebuilding our build cache around content addresses - Northwind Engineering",
			kept: []string{
				"## Key format\n", "## What we would do differently\n", // headings
				"| **Old cache** | **New cache** | **What the worker did**                              |", "|---", // the table, with its header row
				"| miss          | hit           | ran the action, recorded a possible undeclared input |",
				"```\naction {\n", "```\nfunc (c *Client) Lookup(", // code blocks fenced
				"[earlier post on remote execution](https://engineering.northwind.example/infrastructure/remote-execution-at-northwind)",
			},
			dropped: []string{
				"Machine Learning", "On this page", "1. The old cache", // the topics nav, the contents nav
				"Select at least one topic", "Subscribe to email updates", // the footer's form
				"Copy link", "Share this post", // the share buttons
			},
		},
		{
			page:  "sphinx-docs-page",
			url:   "https://docs.tidepool.example/2.4/sharing.html",
			title: "Sharing snapshots between machines — tidepool 2.4 documentation",
			kept: []string{
				"## Before you start\n", "### Example: both sides edit one file\n",
				"```\n$ tidepool remote add shared /mnt/team/tidepool\n$ tidepool remote list\n",
				"```\nimport subprocess\n\nout = subprocess.run([\"tidepool\", \"status\", \"--porcelain\"],\n",
				"[Configuring remotes](https://docs.tidepool.example/2.4/remotes.html)",
			},
			dropped: []string{
				"¶",                                             // headings' permalinks
				"snapshot sync for small teams",                 // the header
				"Quick search", "Previous topic", "Show Source", // the sidebar
				"Created using", "2.4 documentation", // the footer, the related bars
			},
		},
		{
			page:  "news-article",
			url:   "https://sciencewire.example/news/2026-04-lake-sediment-droughts.html",
			title: "Lake sediment cores show a century-long drought hit the valley twice",
			kept: []string{
				"Counting the pairs of bands works much like counting tree rings.",
				"**More information:** R. Lindqvist et al.",
				"[journal.example/articles/varved-lake-droughts](https://journal.example/articles/varved-lake-droughts)",
			},
			dropped: []string{
				"We use cookies", "Cookies on ScienceWire", // the cookie banner
				"Stay ahead of the science", "daily digest", // the newsletter pop-up
				"Astronomy & Space", "Sign In", "Remember me", // the navigation, the sign-in form
				"Last Comments", "Soil fungi", "Explore further", // the aside, the related stories
				"ScienceWire covers", "top stories", "Feedback to editors", // the footer, the buttons
			},
		},
	} {
		t.Run(c.page, func(t *testing.T) {
			t.Parallel()
			in, err := os.Open(filepath.Join("testdata", "pages", c.page+".html"))
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			base, _ := url.Parse(c.url)
			title, text := extractText(in, base)
			if title != c.title {
				t.Errorf("title %q, want %q", title, c.title)
			}
			for _, s := range c.kept {
				if !strings.Contains(text, s) {
					t.Errorf("dropped %q", s)
				}
			}
			for _, s := range c.dropped {
				if strings.Contains(text, s) {
					t.Errorf("kept %q", s)
				}
			}
			golden := filepath.Join("testdata", "pages", c.page+".md")
			if *update {
				if err := os.WriteFile(golden, []byte(text+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if text+"\n" != string(want) {
				t.Errorf("output differs from %s (go test -run TestExtractPages -update rewrites it; review the diff)", golden)
			}
		})
	}
}
