// Package archtest holds the test that keeps the package picture of
// docs/architecture.md true: the table there is the rule, and a package
// that imports one its row does not name fails here. One source, so the
// picture and the code cannot drift apart.
package archtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/deputy-run/deputy"

// listed is what `go list -json` says of one package.
type listed struct {
	ImportPath string
	Imports    []string // non-test imports, direct
	Deps       []string // everything it links, transitively
}

func goList(t *testing.T, root string) []listed {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []listed
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// rule is one row of the table: the packages it is about and what they
// may import of this module. any: the row says "anything".
type rule struct {
	line  int
	may   []string
	any   bool
	names []string
}

var ticked = regexp.MustCompile("`([^`]+)`")

// rules reads the "Packages" table of docs/architecture.md: rows of
// | `pkg`[, `pkg2`] | owns | may import |, where the last cell lists
// packages in backticks (a trailing /... covers a subtree), "anything",
// or "nothing".
func rules(t *testing.T, doc string) map[string]*rule {
	t.Helper()
	f, err := os.Open(doc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]*rule{}
	in := false
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "## "):
			in = l == "## Packages"
			continue
		case !in || !strings.HasPrefix(l, "| `"):
			continue
		}
		cells := strings.Split(strings.Trim(l, "| "), " | ")
		if len(cells) != 3 {
			t.Fatalf("%s:%d: a package row has three cells (package | owns | may import), this has %d", doc, n, len(cells))
		}
		r := &rule{line: n}
		for _, m := range ticked.FindAllStringSubmatch(cells[0], -1) {
			r.names = append(r.names, m[1])
		}
		may := cells[2]
		r.any = strings.Contains(may, "anything")
		for _, m := range ticked.FindAllStringSubmatch(may, -1) {
			r.may = append(r.may, m[1])
		}
		if !r.any && len(r.may) == 0 && !strings.Contains(may, "nothing") {
			t.Fatalf("%s:%d: the may-import cell %q names no package, nor says anything or nothing", doc, n, may)
		}
		for _, name := range r.names {
			if _, dup := out[name]; dup {
				t.Fatalf("%s:%d: %s has a second row", doc, n, name)
			}
			out[name] = r
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("%s: no package table under ## Packages", doc)
	}
	return out
}

// short names a package of the module as the table does: its path under
// the module, "deputy" for the root.
func short(path string) (string, bool) {
	if path == module {
		return "deputy", true
	}
	rest, ok := strings.CutPrefix(path, module+"/")
	return rest, ok
}

func (r *rule) allows(pkg string) bool {
	if r.any {
		return true
	}
	for _, m := range r.may {
		if m == pkg {
			return true
		}
		if base, ok := strings.CutSuffix(m, "/..."); ok && (pkg == base || strings.HasPrefix(pkg, base+"/")) {
			return true
		}
	}
	return false
}

// find is pkg's row: its own, or the nearest parent's that names it with
// /... (a test helper package under its package, say).
func find(rs map[string]*rule, pkg string) *rule {
	if r, ok := rs[pkg]; ok {
		return r
	}
	for p := pkg; strings.Contains(p, "/"); {
		p = p[:strings.LastIndex(p, "/")]
		if r, ok := rs[p+"/..."]; ok {
			return r
		}
	}
	return nil
}

func TestImportsFollowTheArchitecture(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	doc := filepath.Join(root, "docs", "architecture.md")
	rs := rules(t, doc)
	for _, p := range goList(t, root) {
		pkg, ok := short(p.ImportPath)
		if !ok {
			continue
		}
		r := find(rs, pkg)
		if r == nil {
			t.Errorf("%s has no row in %s's package table: say what it owns and what it may import", pkg, doc)
			continue
		}
		for _, imp := range p.Imports {
			dep, ok := short(imp)
			if ok && !r.allows(dep) {
				t.Errorf("%s imports %s, which its row (%s:%d) does not allow", pkg, dep, doc, r.line)
			}
		}
	}
}

// The library's lower floors link no database and no CLI: an in-memory
// agent tree is usable without SQLite or Postgres in the binary, and no
// package but a command's links cobra.
func TestLowerPackagesLinkNoDatabase(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	heavy := []string{"modernc.org/sqlite", "github.com/jackc/pgx/v5", "github.com/dbos-inc/dbos-transact-golang/dbos"}
	floor := []string{"llm", "loop", "tool", "agentdef", "agent", "cost", "clock"}
	for _, p := range goList(t, root) {
		pkg, _ := short(p.ImportPath)
		if slices.Contains(floor, pkg) {
			for _, h := range heavy {
				if slices.Contains(p.Deps, h) {
					t.Errorf("%s links %s: the packages below the store must not", pkg, h)
				}
			}
		}
		if !strings.HasPrefix(pkg, "cmd/") && slices.Contains(p.Deps, "github.com/spf13/cobra") {
			t.Errorf("%s links cobra: only commands may", pkg)
		}
	}
}

// The release binary keeps the linker's dead-code elimination of methods:
// once reflect's method lookup by a name it cannot see (text/template's
// executor) is reachable, the linker keeps every exported method of every
// reachable type, and the SDKs' generated types made deputy 75 MB instead
// of 56 (docs/benchmarks.md, "Binary size"). -dumpdep marks such a
// reachable lookup <ReflectMethod>; the build is scripts/build-release's
// but for the flag.
func TestReleaseBinaryKeepsMethodElimination(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("links the deputy binary")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-tags", "grpcnotrace", "-ldflags=-dumpdep", "-o", os.DevNull, "./cmd/deputy")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out[max(0, len(out)-4000):])
	}
	var kept []string
	for l := range strings.SplitSeq(string(out), "\n") {
		if strings.Contains(l, "<ReflectMethod>") {
			kept = append(kept, l)
		}
	}
	if len(kept) > 0 {
		t.Errorf("the deputy binary reaches a method lookup by name, so the linker keeps every method (%d edges; the first: %s): "+
			"find what links text/template's executor or reflect.Value.MethodByName", len(kept), kept[0])
	}
}
