package fstool

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// monorepo writes a tree of many packages, each with its own .gitignore
// (as a monorepo's siblings have), and returns its root.
func monorepo(tb testing.TB, packages int) string {
	tb.Helper()
	ws := tb.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(ws, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	write(".gitignore", "*.log\nnode_modules/\n")
	for i := range packages {
		pkg := fmt.Sprintf("packages/p%03d", i)
		write(pkg+"/.gitignore", fmt.Sprintf("dist/\n*.gen.%d\n/coverage\n!keep.log\ntmp-*\n**/cache-%d/\n", i, i))
		for _, sub := range []string{"src", "src/lib", "test"} {
			for f := range 6 {
				write(fmt.Sprintf("%s/%s/f%d.ts", pkg, sub, f), "x")
			}
			write(fmt.Sprintf("%s/%s/a.gen.%d", pkg, sub, i), "x")
		}
		write(pkg+"/dist/out.js", "x")
		// Its neighbour's pattern names this one: kept, since a
		// .gitignore's patterns apply under its own directory only.
		write(fmt.Sprintf("%s/b.gen.%d", pkg, (i+1)%packages), "x")
		// The root's *.log still applies in the last package, and the
		// package's own !keep.log overrides it.
		write(pkg+"/src/x.log", "x")
		write(pkg+"/keep.log", "x")
	}
	return ws
}

// walkCount walks ws as glob and grep do, counting what is kept.
func walkCount(tb testing.TB, r *os.Root) int {
	n := 0
	_, err := walk(context.Background(), r, ".", 1<<30, nil, false, func(string, fs.DirEntry) error { n++; return nil })
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// The stacked ignorer keeps what the patterns of every directory met
// would: each package's generated files and dist are left out, by its own
// .gitignore only.
func TestIgnoreMonorepo(t *testing.T) {
	t.Parallel()
	r, err := os.OpenRoot(monorepo(t, 20))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Per package: itself, .gitignore, its neighbour's b.gen, keep.log,
	// 3 directories of 6 kept files.
	if got, want := walkCount(t, r), 1+1+1+20*(4+3*7); got != want {
		t.Fatalf("walk kept %d entries, want %d", got, want)
	}
}

func BenchmarkIgnoreMonorepo(b *testing.B) {
	r, err := os.OpenRoot(monorepo(b, 300))
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	b.ResetTimer()
	for b.Loop() {
		walkCount(b, r)
	}
}

// BenchmarkWalkMonorepoWithIgnored is the same walk reading no ignore
// files: what the walk itself costs, beside BenchmarkIgnoreMonorepo.
func BenchmarkWalkMonorepoWithIgnored(b *testing.B) {
	r, err := os.OpenRoot(monorepo(b, 300))
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	b.ResetTimer()
	for b.Loop() {
		_, err := walk(context.Background(), r, ".", 1<<30, nil, true, func(string, fs.DirEntry) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
	}
}
