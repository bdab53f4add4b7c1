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

// Saved real pages (testdata/pages/README.md says where each is from)
// through extractText: the whole output against a golden file, and, so a
// regenerated golden cannot hide a regression, what must be kept and what
// must be dropped, each checked on its own.
func TestExtractRealPages(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		page, url, title string
		kept, dropped    []string
	}{
		{
			page:  "dropbox-atf",
			url:   "https://dropbox.tech/infrastructure/asynchronous-task-scheduling-at-dropbox",
			title: "How we designed Dropbox ATF: an async task framework - Dropbox",
			kept: []string{
				"## Architecture\n", "## Data model\n", // headings
				"| **Entity status** | **Assoc status** |", "|---", // the table, with its header row
				"| enqueued          | started          |",
				"\n```\n", // code blocks fenced
				"[Edgestore](https://dropbox.tech/infrastructure/reintroducing-edgestore)",
			},
			dropped: []string{
				"Machine Learning Mobile Security", "Select at least one topic", // the nav's topics, the footer's form
				"Subscribe to email updates",
			},
		},
		{
			page:  "mercurial-evolve-sharing",
			url:   "https://www.mercurial-scm.org/doc/evolve/sharing.html",
			title: "Evolve: Shared Mutable History — evolve extension for Mercurial",
			kept: []string{
				"## Sharing with a single developer\n", "### Example 2: Amend again, locally\n",
				"```\n$ cd test-repo\n$ echo 'my new project' > file1\n",
				"[user guide](https://www.mercurial-scm.org/doc/evolve/user-guide.html)",
			},
			dropped: []string{"¶"}, // headings' permalinks
		},
		{
			page:  "physorg-neanderthal-tool",
			url:   "https://phys.org/news/2019-10-flint-flake-tool-partially-birch.html",
			title: "Flint flake tool partially covered by birch tar adds to evidence of Neanderthal complex thinking",
			kept: []string{
				"Known as Doggerland, the area was icy tundra",
				"**More information:** Marcel J. L. Th. Niekus et al.",
				"[DOI: 10.1073/pnas.1907828116](http://dx.doi.org/10.1073/pnas.1907828116)",
			},
			dropped: []string{
				"This site uses cookies", "Your Privacy", // the cookie banner
				"Nanotechnology Physics", "Sign In", // the navigation
				"Last Comments", "Medical Xpress covers", // the aside, the footer
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
				t.Errorf("output differs from %s (go test -run TestExtractRealPages -update rewrites it; review the diff)", golden)
			}
		})
	}
}
