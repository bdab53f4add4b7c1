package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// sandboxID is the uid and gid programs run as inside: nobody.
const sandboxID = "65534"

// systemDirs are the host's top-level entries that make up the read-only
// system when there is no root filesystem. Merged-/usr hosts have most of
// them as symlinks into /usr, which are recreated as symlinks.
var systemDirs = []string{"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "opt"}

// ownMounts are the top-level entries of a root filesystem that the
// sandbox gets fresh instead of from it.
var ownMounts = map[string]bool{"proc": true, "dev": true, "sys": true, "tmp": true}

// namespaceArgs are the bwrap options that make the sandbox: every
// namespace new (network too unless granted), an unprivileged user that
// cannot make more user namespaces (a new one would give it capabilities
// over its own mounts), no capabilities, its own session (no TIOCSTI into
// deputy's terminal), and death with its parent.
func namespaceArgs(network bool) []string {
	a := []string{"--unshare-all", "--unshare-user", "--disable-userns", "--cap-drop", "ALL",
		"--uid", sandboxID, "--gid", sandboxID, "--die-with-parent", "--new-session"}
	if network {
		a = append(a, "--share-net")
	}
	return a
}

// mountArgs is the file system part of a box's bwrap command line: the
// system (the host's or the root filesystem), fresh /proc and /dev, tmp as
// /tmp (a fresh tmpfs if ""), then the roots at their host paths, parents
// before children so nested grants stack.
func mountArgs(p Policy, roots []root, tmp string) ([]string, error) {
	var a []string
	if p.RootFS == "" {
		sys, err := hostSystem(p.Network)
		if err != nil {
			return nil, err
		}
		a = append(a, sys...)
	} else {
		points := make([]string, len(roots))
		for i, r := range roots {
			points[i] = r.path
		}
		ents, err := os.ReadDir(p.RootFS)
		if err != nil {
			return nil, fmt.Errorf("sandbox: root filesystem: %w", err)
		}
		for _, e := range ents {
			if ownMounts[e.Name()] {
				continue
			}
			sub, err := bindTree(filepath.Join(p.RootFS, e.Name()), "/"+e.Name(), points)
			if err != nil {
				return nil, err
			}
			a = append(a, sub...)
		}
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev")
	if tmp == "" {
		a = append(a, "--tmpfs", "/tmp")
	} else {
		a = append(a, "--bind", tmp, "/tmp")
	}
	sorted := append([]root(nil), roots...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].path < sorted[j].path })
	for _, r := range sorted {
		op := "--ro-bind"
		if r.writable {
			op = "--bind"
		}
		a = append(a, op, r.path, r.path)
	}
	// Over the writable workspace, last, so they win.
	g, err := guardArgs(roots[0].path, p.guards)
	if err != nil {
		return nil, err
	}
	a = append(a, g...)
	return a, nil
}

// hostSystem mounts the host's system directories read-only, masking
// what other users may not read (see systemMasks), and, with the network
// granted, the target of an /etc/resolv.conf symlink (it usually points
// into /run, which is not mounted).
func hostSystem(network bool) ([]string, error) {
	var a []string
	for _, name := range systemDirs {
		p := "/" + name
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return nil, fmt.Errorf("sandbox: %w", err)
			}
			a = append(a, "--symlink", t, p)
		case fi.IsDir():
			a = append(a, "--ro-bind", p, p)
		}
	}
	a = append(a, systemMasks(os.Geteuid() == 0)...)
	if network {
		if t, err := filepath.EvalSymlinks("/etc/resolv.conf"); err == nil && t != "/etc/resolv.conf" && !inSystem(t) {
			a = append(a, "--ro-bind", t, t)
		}
	}
	return a, nil
}

// inSystem reports whether a resolved host path lies in a mounted system
// directory.
func inSystem(p string) bool {
	for _, name := range systemDirs {
		if within(p, "/"+name) {
			return true
		}
	}
	return false
}

// packageTree is the part of the system only the package manager writes
// (/usr but /usr/local): 150,000 entries on a Debian host with a toolchain,
// 1.8 s to walk warm and 8 s cold, against a few milliseconds for all the
// rest. Its files are the same on every machine of the distribution, so
// it holds no secret of this host's; it is still walked, once per
// process, for the few private directories packages ship (polkit's
// rules.d).
const packageTree = "/usr"

var (
	packageMasksOnce sync.Once
	packageMasks     []string
)

// systemMasks hides the entries of the system directories that other
// users may not read: an empty tmpfs over a directory others cannot list
// or enter, /dev/null over a regular file others cannot read. When deputy
// is root the sandbox user is host root (bwrap maps the one uid it has),
// the owner of root's 0600 files and 0700 directories, and capabilities
// are dropped but ownership is not; so the sandbox reads what any user of
// the host may read, and nothing root alone may. For another user the
// same holds of the files it owns there (rare outside /etc and /opt); the
// package tree is only walked for root, since its files are root's.
//
// Everything but the package tree is walked at every New, so a file made
// root-only a moment ago is masked; the package tree's masks are computed
// once per process (see packageTree): a private file put under /usr
// (outside /usr/local) while deputy runs is not masked until it restarts.
func systemMasks(root bool) []string {
	var a []string
	for _, name := range systemDirs {
		p := "/" + name
		if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
			continue
		}
		if p == packageTree {
			if root {
				packageMasksOnce.Do(func() { packageMasks = privateEntries(p, p+"/local") })
				a = append(a, packageMasks...)
			}
			a = append(a, privateEntries(p+"/local", "")...)
			continue
		}
		a = append(a, privateEntries(p, "")...)
	}
	return a
}

// privateEntries walks dir (skipping skip) and returns the bwrap options
// masking the entries others may not read. Symlinks are left alone: their
// targets are masked where they lie, or are not mounted.
func privateEntries(dir, skip string) []string {
	var a []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir || d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		if p == skip {
			return filepath.SkipDir
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		perm := fi.Mode().Perm()
		switch {
		case d.IsDir() && (perm&0o004 == 0 || perm&0o001 == 0):
			a = append(a, "--tmpfs", p)
			return filepath.SkipDir
		case d.Type().IsRegular() && perm&0o004 == 0:
			a = append(a, "--ro-bind", "/dev/null", p)
		}
		return nil
	})
	return a
}

// bindTree mounts src read-only at dst, unless a mount point (a root) lies
// below dst: bwrap cannot create that mount point inside a read-only bind,
// so dst becomes a directory on the sandbox's tmpfs root holding binds of
// src's entries, expanded the same way. An entry that is itself a mount
// point is left to the root's bind.
func bindTree(src, dst string, points []string) ([]string, error) {
	fi, err := os.Lstat(src)
	if err != nil {
		return nil, fmt.Errorf("sandbox: root filesystem: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		t, err := os.Readlink(src)
		if err != nil {
			return nil, fmt.Errorf("sandbox: root filesystem: %w", err)
		}
		return []string{"--symlink", t, dst}, nil
	}
	expand := false
	for _, p := range points {
		if p == dst {
			return nil, nil
		}
		if within(p, dst) {
			expand = true
		}
	}
	if !expand || !fi.IsDir() {
		return []string{"--ro-bind", src, dst}, nil
	}
	a := []string{"--dir", dst}
	ents, err := os.ReadDir(src)
	if err != nil {
		return nil, fmt.Errorf("sandbox: root filesystem: %w", err)
	}
	for _, e := range ents {
		sub, err := bindTree(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()), points)
		if err != nil {
			return nil, err
		}
		a = append(a, sub...)
	}
	return a, nil
}

// maskTargets are the paths the masks among mount options cover (an empty
// tmpfs over a directory, /dev/null over a file): systemMasks' output.
func maskTargets(mounts []string) []string {
	var ps []string
	for i := 0; i+1 < len(mounts); i++ {
		switch {
		case mounts[i] == "--tmpfs" && inSystem(mounts[i+1]):
			ps = append(ps, mounts[i+1])
		case mounts[i] == "--ro-bind" && i+2 < len(mounts) && mounts[i+1] == "/dev/null":
			ps = append(ps, mounts[i+2])
		}
	}
	return ps
}

// gone reports whether nothing is at host path p any more.
func gone(p string) bool {
	_, err := os.Lstat(p)
	return errors.Is(err, fs.ErrNotExist)
}
