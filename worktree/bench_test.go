package worktree

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkWorktreeAddRemove measures a child's worktree lifecycle without
// work: Add (a checkout of 5,000 files) and Remove, on a repository of 5,000
// files of about 1 KiB in 50 directories. "packed" is the usual state of a
// cloned or gc'd repository; "loose" is right after `git add && git commit`
// of everything, where every checked-out file is one more object file to open.
func BenchmarkWorktreeAddRemove(b *testing.B) {
	for _, packed := range []bool{true, false} {
		name := "loose"
		if packed {
			name = "packed"
		}
		b.Run(name, func(b *testing.B) { benchAddRemove(b, packed) })
	}
}

func benchAddRemove(b *testing.B, packed bool) {
	repo := b.TempDir()
	run(b, repo, "init", "--quiet", "--initial-branch=main")
	line := strings.Repeat("x", 63) + "\n"
	body := strings.Repeat(line, 16)
	for d := range 50 {
		dir := filepath.Join(repo, fmt.Sprintf("dir%02d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range 100 {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("file%03d.txt", f)), []byte(body+fmt.Sprint(d, f)), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	run(b, repo, "add", "--all")
	run(b, repo, "commit", "--quiet", "-m", "5000 files")
	if packed {
		run(b, repo, "repack", "-a", "-d", "-q")
		run(b, repo, "prune-packed")
	}
	if n := strings.Count(run(b, repo, "ls-files"), "\n") + 1; n != 5000 {
		b.Fatalf("%d files", n)
	}
	ctx := context.Background()
	i := 0
	var adding, removing time.Duration
	for b.Loop() {
		i++
		t0 := time.Now()
		tr, err := Add(ctx, repo, fmt.Sprintf("i-%d", i))
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := tr.Remove(ctx); err != nil {
			b.Fatal(err)
		}
		adding += t1.Sub(t0)
		removing += time.Since(t1)
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(ms(adding+removing), "ms/add+remove")
	b.ReportMetric(ms(adding), "ms/add")
	b.ReportMetric(ms(removing), "ms/remove")
}
