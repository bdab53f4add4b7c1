package clients

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// docRow is one row of docs/clients.md's matrix.
type docRow struct {
	line              int
	clients, versions []string // the row's packages and their versions, empty on a continuation row
	check, status     string
}

var ticked = regexp.MustCompile("`([^`]+)`")

// docRows reads the table under "## The matrix": | client | version | check
// | what it does | status |, a continuation row leaving client and version
// empty.
func docRows(t *testing.T) []docRow {
	t.Helper()
	b, err := os.ReadFile("../docs/clients.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows []docRow
	in := false
	for n, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "## ") {
			in = l == "## The matrix"
		}
		if !in || !strings.HasPrefix(l, "| ") || strings.HasPrefix(l, "| client") || strings.HasPrefix(l, "| ---") {
			continue
		}
		cells := strings.Split(strings.TrimSuffix(strings.TrimPrefix(l, "|"), "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if len(cells) != 5 {
			t.Fatalf("docs/clients.md:%d: a matrix row has five cells, this has %d", n+1, len(cells))
		}
		r := docRow{line: n + 1, check: strings.Trim(cells[2], "`"), status: cells[4]}
		for _, m := range ticked.FindAllStringSubmatch(cells[0], -1) {
			r.clients = append(r.clients, m[1])
		}
		if cells[1] != "" {
			r.versions = strings.Split(cells[1], " + ")
		}
		rows = append(rows, r)
	}
	return rows
}

// The table in docs/clients.md is the matrix: one row per check (in the
// reader's order, not the code's), each version the one package.json pins,
// and "fails" exactly where knownGaps says so. It needs no Node.
func TestDocsTableMatchesTheMatrix(t *testing.T) {
	t.Parallel()
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	b, err := os.ReadFile("package.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		t.Fatalf("package.json: %v", err)
	}
	documented := map[string]docRow{}
	for _, r := range docRows(t) {
		if len(r.clients) != len(r.versions) {
			t.Errorf("docs/clients.md:%d: %d packages, %d versions", r.line, len(r.clients), len(r.versions))
		}
		for i, c := range r.clients {
			if i < len(r.versions) && pkg.Dependencies[c] != r.versions[i] {
				t.Errorf("docs/clients.md:%d: %s %s, but package.json pins %q", r.line, c, r.versions[i], pkg.Dependencies[c])
			}
		}
		documented[r.check] = r
	}
	for _, c := range checks() {
		r, ok := documented[c.name]
		if !ok {
			t.Errorf("check %q has no row in docs/clients.md's matrix", c.name)
			continue
		}
		delete(documented, c.name)
		_, gap := knownGaps[c.name]
		if fails := strings.HasPrefix(r.status, "**fails**"); fails != gap || (!gap && r.status != "passes") {
			t.Errorf("docs/clients.md:%d: %s is %q, but knownGaps has it: %v", r.line, c.name, r.status, gap)
		}
	}
	for name, r := range documented {
		t.Errorf("docs/clients.md:%d: %q is no check of TestClients", r.line, name)
	}
}
