package fence

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// UntrustedFile is the workspace's record of tripwires that fired
// (TripwireError): the changed paths, the instance and the time, one path
// a line. deputy writes it when a fenced child's tripwire fires, at the
// child's end or when its fence is released (a child that asked, was
// paused, or whose process closes), and refuses to load the workspace's
// definitions, skills and deputy.yaml, and to fence a child there, while
// it exists (CheckTrusted). It lies in .deputy, which fenced children can
// neither read nor write: only deputy or the user changes it. The user
// removes it once the files are reviewed.
const UntrustedFile = ".deputy/untrusted"

const untrustedHeader = "# deputy: files deputy trusts changed while a fenced child ran (its fence tripwire fired).\n" +
	"# deputy will not start on this workspace while this file exists. Review each path below (a\n" +
	"# definition, skill, deputy.yaml, .claude setting or git hook you did not write may be planted\n" +
	"# code: restore or delete it), then remove this file.\n" +
	"# time\tinstance\tpath\n"

// markUntrusted appends e's paths to ws's UntrustedFile, made (with its
// header) when it does not exist. One write per finding, appended, so
// children tripping at once do not mix their lines.
func markUntrusted(ws string, e *TripwireError, at time.Time) error {
	p := filepath.Join(ws, UntrustedFile)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	var b strings.Builder
	if f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		_, err = f.WriteString(untrustedHeader)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	ts := at.UTC().Format(time.RFC3339)
	for _, c := range e.Changed {
		fmt.Fprintf(&b, "%s\t%s\t%s\n", ts, e.ID, c)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(b.String())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// UntrustedError is the refusal to start on a workspace whose
// UntrustedFile exists: a fence tripwire fired there and nobody has
// reviewed the files since.
type UntrustedError struct {
	Marker string   // the UntrustedFile's absolute path
	Paths  []string // the changed paths it lists, first finding first
	Found  []string // each finding: "instance at time"
}

func (e *UntrustedError) Error() string {
	paths := "(none listed)"
	if len(e.Paths) > 0 {
		paths = strings.Join(e.Paths, ", ")
	}
	by := ""
	if len(e.Found) > 0 {
		by = " (" + strings.Join(e.Found, "; ") + ")"
	}
	return fmt.Sprintf("files deputy trusts changed while a fenced child ran%s, and have not been reviewed: %s. "+
		"deputy will not load this workspace's definitions, skills or deputy.yaml, nor fence a child here, until "+
		"you have: review those files (restore or delete what you did not write), then remove %s",
		by, paths, e.Marker)
}

// CheckTrusted returns an *UntrustedError when ws's UntrustedFile exists
// (a file deputy cannot read counts as existing).
func CheckTrusted(ws string) error {
	p := filepath.Join(ws, UntrustedFile)
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	e := &UntrustedError{Marker: p}
	if err != nil {
		return e
	}
	defer f.Close()
	seenPath, seenFind := map[string]bool{}, map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		fs := strings.SplitN(line, "\t", 3)
		if len(fs) != 3 {
			if !seenPath[line] {
				seenPath[line] = true
				e.Paths = append(e.Paths, line)
			}
			continue
		}
		if find := fs[1] + " at " + fs[0]; !seenFind[find] {
			seenFind[find] = true
			e.Found = append(e.Found, find)
		}
		if !seenPath[fs[2]] {
			seenPath[fs[2]] = true
			e.Paths = append(e.Paths, fs[2])
		}
	}
	return e
}
