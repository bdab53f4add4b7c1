package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// version, when set at link time (-ldflags "-X main.version=v1.2.3"), is
// printed as it is; otherwise the build info says which deputy this is.
var version = ""

// versionString is the version `deputy version` prints and the MCP server
// reports: one line.
func versionString() string {
	bi, _ := debug.ReadBuildInfo() // nil when the binary has none
	return describeVersion(version, bi)
}

// describeVersion is linked if set, else the module version of bi followed
// by the commit it was built from, if the build recorded one:
//
//	go install .../cmd/deputy@v1.2.3    v1.2.3
//	go build or go install in a clone   v0.0.0-20261201222200-21c8a75b18ea+dirty (commit 21c8a75b18ea…, committed 2026-12-01T22:22:00Z, modified)
//	go run, -buildvcs=false, no .git    (devel) (commit not recorded)
//
// A module fetched by version has no VCS settings: its version names the
// commit. A build in a clone gets a pseudo-version naming the commit
// (Go 1.24 and later) and the settings; "modified" means the working tree
// had changes the commit does not have.
func describeVersion(linked string, bi *debug.BuildInfo) string {
	if linked != "" {
		return linked
	}
	if bi == nil {
		return "unknown (no build information in the binary)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	vcs := map[string]string{}
	for _, s := range bi.Settings {
		vcs[s.Key] = s.Value
	}
	rev := vcs["vcs.revision"]
	if rev == "" {
		if v == "(devel)" {
			return v + " (commit not recorded)"
		}
		return v
	}
	about := []string{"commit " + rev}
	if t := vcs["vcs.time"]; t != "" {
		about = append(about, "committed "+t)
	}
	if vcs["vcs.modified"] == "true" {
		about = append(about, "modified")
	}
	return v + " (" + strings.Join(about, ", ") + ")"
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print deputy's version and the commit it was built from",
		Example: "  deputy version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "deputy %s\n", versionString())
			return nil
		},
	}
}
