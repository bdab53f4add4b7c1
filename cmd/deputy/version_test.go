package main

import (
	"os/exec"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersionDescribesEachKindOfBuild: what each way of building leaves in
// the build info, and the line made of it.
func TestVersionDescribesEachKindOfBuild(t *testing.T) {
	t.Parallel()
	rev := "21c8a75b18eaf5487f26154a89893964e43b4d19"
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "-trimpath", Value: "true"}, {Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: "2026-12-01T22:22:00Z"}, {Key: "vcs.modified", Value: modified}}
	}
	info := func(v string, s []debug.BuildSetting) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Path: "github.com/deputy-run/deputy", Version: v}, Settings: s}
	}
	for _, c := range []struct {
		name, linked string
		bi           *debug.BuildInfo
		want         string
	}{
		{"go install @version", "", info("v1.2.3", nil), "v1.2.3"},
		{"go build in a clean clone", "", info("v0.0.0-20261201222200-21c8a75b18ea", vcs("false")),
			"v0.0.0-20261201222200-21c8a75b18ea (commit " + rev + ", committed 2026-12-01T22:22:00Z)"},
		{"go build with changes", "", info("v0.0.0-20261201222200-21c8a75b18ea+dirty", vcs("true")),
			"v0.0.0-20261201222200-21c8a75b18ea+dirty (commit " + rev + ", committed 2026-12-01T22:22:00Z, modified)"},
		{"go build at a tag", "", info("v1.2.3", vcs("false")), "v1.2.3 (commit " + rev + ", committed 2026-12-01T22:22:00Z)"},
		{"go run", "", info("(devel)", []debug.BuildSetting{{Key: "-compiler", Value: "gc"}}), "(devel) (commit not recorded)"},
		{"no main version", "", info("", nil), "(devel) (commit not recorded)"},
		{"no build info", "", nil, "unknown (no build information in the binary)"},
		{"set at link time", "v9.9.9", info("v1.2.3", vcs("true")), "v9.9.9"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := describeVersion(c.linked, c.bi); got != c.want {
				t.Fatalf("got %q\nwant %q", got, c.want)
			}
		})
	}
}

// TestVersionPrintsTheBinarysBuildInfo: `deputy version` on the built
// binary says what `go version -m` reads from it: the module version and,
// where the build recorded one, the commit.
func TestVersionPrintsTheBinarysBuildInfo(t *testing.T) {
	t.Parallel()
	out, errOut, code := deputy(t, t.TempDir(), nil, "version")
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "deputy ") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	m, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	mod := regexp.MustCompile(`(?m)^\tmod\t\S+\t(\S+)`).FindSubmatch(m)
	if mod == nil {
		t.Fatalf("no main module in go version -m:\n%s", m)
	}
	want := []string{string(mod[1])}
	if r := regexp.MustCompile(`(?m)^\tbuild\tvcs\.revision=(\S+)`).FindSubmatch(m); r != nil {
		want = append(want, "commit "+string(r[1]))
	} else {
		want = append(want, "(commit not recorded)")
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Fatalf("deputy version printed %q, without %q (go version -m:\n%s)", out, w, m)
		}
	}
}
