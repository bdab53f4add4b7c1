package fstool_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// escapeCase is one way a model might try to reach outside the workspace.
// path is used by read_file, edit_file and grep, and (with "/*") by glob;
// write is what write_file tries to create, chosen so that a broken
// confinement would leave a file the test notices instead of clobbering a
// real one.
type escapeCase struct {
	name  string
	path  string
	write string
}

// escapeFixture builds a workspace next to an outside directory holding a
// sentinel file, plus every kind of symlink that leads out.
type escapeFixture struct {
	ws, outside, sentinel string
	cases                 []escapeCase
}

const sentinelText = "SENTINEL outside the workspace\n"

func newEscapeFixture(t *testing.T) *escapeFixture {
	t.Helper()
	ws, outside := t.TempDir(), t.TempDir()
	sentinel := filepath.Join(outside, "secret.txt")
	mustWrite(t, sentinel, sentinelText)
	mustWrite(t, filepath.Join(ws, "inside.txt"), "inside\n")
	mkdir(t, filepath.Join(ws, "a"))
	rel, err := filepath.Rel(ws, outside) // like ../002
	if err != nil {
		t.Fatal(err)
	}
	link := func(target, name string) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	link("/etc", "etc")                                   // absolute symlink to a system dir
	link(outside, "out")                                  // symlinked dir, absolute
	link(rel, "relout")                                   // symlinked dir, relative
	link("c2", "c1")                                      // chain: c1 -> c2 -> outside file
	link(sentinel, "c2")                                  //
	link("d2", "d1")                                      // chain of dirs: d1 -> d2 -> outside
	link(outside, "d2")                                   //
	link(filepath.Join(outside, "ghost.txt"), "dangling") // dangling, to a file that would be created outside
	link(filepath.Join("..", rel, "ghost.txt"), "a/dangling-rel")

	name := "deputy-escape-test-" + filepath.Base(ws)
	return &escapeFixture{
		ws: ws, outside: outside, sentinel: sentinel,
		cases: []escapeCase{
			{"dotdot", filepath.Join(rel, "secret.txt"), filepath.Join(rel, "new.txt")},
			{"dotdot-x", "../x", "../" + name},
			{"absolute-outside", sentinel, filepath.Join(outside, "new.txt")},
			{"etc-passwd", "/etc/passwd", "/etc/" + name},
			{"a-dotdot-dotdot", "a/../" + filepath.Join(rel, "secret.txt"), "a/../" + filepath.Join(rel, "new.txt")},
			{"symlink-to-etc", "etc/passwd", "etc/" + name},
			{"symlinked-dir", "out/secret.txt", "out/new.txt"},
			{"symlinked-dir-relative", "relout/secret.txt", "relout/new.txt"},
			{"symlink-chain", "c1", "c1"},
			{"symlinked-dir-chain", "d1/secret.txt", "d1/new.txt"},
			{"dangling-symlink", "dangling", "dangling"},
			{"dangling-relative-in-subdir", "a/dangling-rel", "a/dangling-rel"},
		},
	}
}

// assertUntouched checks that nothing outside the workspace was changed.
func (f *escapeFixture) assertUntouched(t *testing.T) {
	t.Helper()
	if got := readFile(t, f.sentinel); got != sentinelText {
		t.Errorf("sentinel changed: %q", got)
	}
	ents, err := os.ReadDir(f.outside)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"secret.txt"}) {
		t.Errorf("outside dir now holds %v", names)
	}
	stray := []string{
		filepath.Join(filepath.Dir(f.ws), "x"),
		filepath.Join(filepath.Dir(f.ws), "deputy-escape-test-"+filepath.Base(f.ws)),
		"/etc/deputy-escape-test-" + filepath.Base(f.ws),
	}
	for _, p := range stray {
		if _, err := os.Lstat(p); err == nil {
			os.Remove(p)
			t.Errorf("%s was created outside the workspace", p)
		}
	}
}

func TestEveryFileToolRefusesEscapes(t *testing.T) {
	t.Parallel()
	f := newEscapeFixture(t)
	set := newSet(t, f.ws)
	for _, c := range f.cases {
		calls := []struct {
			tool string
			args map[string]any
		}{
			{"read_file", map[string]any{"path": c.path}},
			{"write_file", map[string]any{"path": c.write, "content": "PWNED"}},
			{"edit_file", map[string]any{"path": c.path, "old": "SENTINEL", "new": "PWNED"}},
			{"glob", map[string]any{"pattern": c.path + "/*"}},
			{"grep", map[string]any{"pattern": "SENTINEL|root", "path": c.path}},
		}
		for _, call := range calls {
			t.Run(c.name+"/"+call.tool, func(t *testing.T) {
				out, isErr := callTool(t, set, call.tool, call.args)
				if !isErr {
					t.Fatalf("not refused: %q", out)
				}
				if !strings.Contains(out, "outside the workspace") {
					t.Errorf("refusal does not say why: %q", out)
				}
				if strings.Contains(out, "SENTINEL") || strings.Contains(out, "root:") {
					t.Errorf("outside content leaked: %q", out)
				}
				f.assertUntouched(t)
			})
		}
	}
}

// Walking the whole workspace must not follow any of the links out.
func TestWalksDoNotFollowSymlinksOut(t *testing.T) {
	t.Parallel()
	f := newEscapeFixture(t)
	set := newSet(t, f.ws)
	out, isErr := callTool(t, set, "glob", map[string]any{"pattern": "**"})
	if isErr {
		t.Fatal(out)
	}
	if strings.Contains(out, "secret.txt") || strings.Contains(out, "passwd") {
		t.Errorf("glob listed outside files:\n%s", out)
	}
	if !strings.Contains(out, "inside.txt") {
		t.Errorf("glob missed inside.txt:\n%s", out)
	}
	out, isErr = callTool(t, set, "grep", map[string]any{"pattern": "SENTINEL|root:"})
	if isErr {
		t.Fatal(out)
	}
	if !strings.HasPrefix(out, "no matches") {
		t.Errorf("grep searched outside files:\n%s", out)
	}
	f.assertUntouched(t)
}

func TestInsidePathsAndLinksAreAccepted(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	mustWrite(t, filepath.Join(ws, "dir", "f.txt"), "hello\n")
	if err := os.Symlink(filepath.Join(ws, "dir", "f.txt"), filepath.Join(ws, "abs-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("dir", filepath.Join(ws, "rel-dir")); err != nil {
		t.Fatal(err)
	}
	set := newSet(t, ws)
	for _, p := range []string{
		"dir/f.txt",
		filepath.Join(ws, "dir", "f.txt"), // absolute, inside
		"dir/../dir/f.txt",
		"./dir/f.txt",
		"abs-link",      // absolute symlink pointing inside (os.Root alone refuses these)
		"rel-dir/f.txt", // relative symlinked dir inside
	} {
		out, isErr := callTool(t, set, "read_file", map[string]any{"path": p})
		if isErr || !strings.Contains(out, "hello") {
			t.Errorf("read_file %s: %q", p, out)
		}
	}
	// Writing through an inside symlink changes the target, keeps the link.
	if out, isErr := callTool(t, set, "write_file", map[string]any{"path": "abs-link", "content": "bye\n"}); isErr {
		t.Fatal(out)
	}
	if got := readFile(t, filepath.Join(ws, "dir", "f.txt")); got != "bye\n" {
		t.Errorf("target = %q", got)
	}
	if fi, err := os.Lstat(filepath.Join(ws, "abs-link")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("link replaced: %v %v", fi, err)
	}
}

func TestSymlinkLoopAndFileAsDir(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	for _, l := range [][2]string{{"loop1", "loop2"}, {"loop2", "loop1"}, {"self", "self"}} {
		if err := os.Symlink(l[1], filepath.Join(ws, l[0])); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, filepath.Join(ws, "f.txt"), "x")
	set := newSet(t, ws)
	for _, p := range []string{"loop1", "self/x"} {
		out, isErr := callTool(t, set, "read_file", map[string]any{"path": p})
		if !isErr || !strings.Contains(out, "too many levels of symbolic links") {
			t.Errorf("%s: %q", p, out)
		}
	}
	out, isErr := callTool(t, set, "write_file", map[string]any{"path": "f.txt/x", "content": "x"})
	if !isErr || !strings.Contains(out, "f.txt/x: not a directory") {
		t.Errorf("file as dir: %q", out)
	}
	// Walks list the links without following them.
	out, _ = callTool(t, set, "glob", map[string]any{"pattern": "**"})
	if out != "f.txt\nloop1\nloop2\nself\n" {
		t.Errorf("glob: %q", out)
	}
}
