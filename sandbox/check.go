package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/deputy-run/deputy/sandbox/cgroup"
)

// InstallHint is how to get bubblewrap.
const InstallHint = "install bubblewrap: apt-get install bubblewrap (Debian, Ubuntu), dnf install bubblewrap (Fedora), " +
	"apk add bubblewrap (Alpine)"

var (
	availMu sync.Mutex
	availOK = map[string]string{} // bwrap as configured → resolved path, for those that worked
)

// Available reports whether the sandbox level works here: bubblewrap is
// installed and can make a sandbox (user namespaces allowed). The error
// says how to fix what is missing.
func Available() error { return AvailableAt("bwrap") }

// AvailableAt is Available for a given bubblewrap binary (a name looked
// up on PATH, or a path), as Policy.Bwrap names it.
func AvailableAt(bwrap string) error {
	if bwrap == "" {
		bwrap = "bwrap"
	}
	_, err := available(bwrap)
	return err
}

// available finds bwrap and makes one trial sandbox with the options every
// box uses. Success is remembered; a failure is retried next time, as the
// fix (installing a package, a sysctl) needs no restart.
func available(bwrap string) (string, error) {
	if !supported {
		return "", fmt.Errorf("sandbox: %w", errUnsupported)
	}
	availMu.Lock()
	defer availMu.Unlock()
	if p, ok := availOK[bwrap]; ok {
		return p, nil
	}
	path, err := exec.LookPath(bwrap)
	if err != nil {
		return "", fmt.Errorf("sandbox: bubblewrap (%s) not found: %s", bwrap, InstallHint)
	}
	if err := trial(path); err != nil {
		return "", err
	}
	availOK[bwrap] = path
	return path, nil
}

// trial runs `true` in a sandbox made like a box's.
func trial(bwrap string) error {
	args := namespaceArgs(false)
	for _, name := range systemDirs {
		args = append(args, "--ro-bind-try", "/"+name, "/"+name)
	}
	args = append(args, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--", "true")
	var stderr bytes.Buffer
	cmd := exec.Command(bwrap, args...)
	cmd.Stderr = &stderr
	cmd.Dir = "/"
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("sandbox: bubblewrap cannot make a sandbox here: %s; %s", msg, usernsFix(msg))
	}
	return nil
}

// usernsFix is the advice for a failed trial sandbox.
func usernsFix(msg string) string {
	switch {
	case strings.Contains(msg, "Unknown option") || strings.Contains(msg, "unrecognized option"):
		return "bubblewrap is too old (0.8.0 or later is needed for --disable-userns): upgrade it"
	case readSysctl("kernel/apparmor_restrict_unprivileged_userns") == "1":
		return "AppArmor forbids unprivileged user namespaces: sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, " +
			"or give bwrap an AppArmor profile that allows userns"
	case readSysctl("kernel/unprivileged_userns_clone") == "0":
		return "unprivileged user namespaces are off: sysctl -w kernel.unprivileged_userns_clone=1"
	case readSysctl("user/max_user_namespaces") == "0":
		return "user namespaces are off: sysctl -w user.max_user_namespaces=15000"
	}
	return "user namespaces must be allowed (in a container, run it with --security-opt seccomp=unconfined or " +
		"--privileged, or use a runtime that permits nested user namespaces)"
}

func readSysctl(name string) string {
	b, err := os.ReadFile("/proc/sys/" + name)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Report is what Check found, for `deputy doctor`.
type Report struct {
	Items []Item
}

// Item is one capability the isolation levels rely on.
type Item struct {
	Name   string // "bubblewrap", "user namespaces", "cgroup pids", "cgroup memory", "cgroup cpu", "Landlock", "root filesystem"
	OK     bool
	Detail string // what was found: a version, a path, or what is wrong
	Fix    string // how to get it, when not OK
	// Needed says what depends on it: "sandbox" (and container),
	// "container", or "optional" (something degrades gracefully).
	Needed string
}

// Check examines this machine for the sandbox and container levels; bwrap
// is the binary to use ("bwrap"), rootFS the configured root filesystem
// ("" if none).
func Check(bwrap, rootFS string) Report {
	if bwrap == "" {
		bwrap = "bwrap"
	}
	var r Report
	add := func(it Item) { r.Items = append(r.Items, it) }

	path, err := exec.LookPath(bwrap)
	if err != nil {
		add(Item{Name: "bubblewrap", Needed: "sandbox", Detail: bwrap + " not found", Fix: InstallHint})
		add(Item{Name: "user namespaces", Needed: "sandbox", Detail: "not tried without bubblewrap", Fix: InstallHint})
	} else {
		out, _ := exec.Command(path, "--version").Output()
		add(Item{Name: "bubblewrap", Needed: "sandbox", OK: true, Detail: strings.TrimSpace(string(out)) + " at " + path})
		if _, err := available(bwrap); err != nil {
			add(Item{Name: "user namespaces", Needed: "sandbox", Detail: err.Error(), Fix: usernsFix(err.Error())})
		} else {
			add(Item{Name: "user namespaces", Needed: "sandbox", OK: true, Detail: "a trial sandbox ran"})
		}
	}

	// Each controller on its own line: a box uses those it can have.
	cg, why := cgroup.New(cgroup.Limits{Tasks: DefaultMaxProcesses, Memory: DefaultMemoryBytes(), CPUs: DefaultCPUs()})
	for _, c := range cgroup.Controllers {
		if dir := cg.Dir(c); dir == "" {
			add(Item{Name: "cgroup " + c, Needed: "optional", Detail: fmt.Sprint(why[c]), Fix: cgroupFix})
		} else {
			ver := "v1"
			if cg.V2(c) {
				ver = "v2"
			}
			add(Item{Name: "cgroup " + c, Needed: "optional", OK: true, Detail: "cgroup " + ver + " at " + filepath.Dir(dir)})
		}
	}
	if cg != nil {
		_ = cg.Remove()
	}

	if abi, err := landlockABI(); err != nil {
		add(Item{Name: "Landlock", Needed: "optional", Detail: err.Error(),
			Fix: "use Linux 5.13 or later with Landlock enabled; file tools then rely on path checks alone"})
	} else {
		add(Item{Name: "Landlock", Needed: "optional", OK: true, Detail: fmt.Sprintf("ABI %d", abi)})
	}

	const rootfsFix = "make a root filesystem (e.g. `debootstrap stable /srv/deputy-rootfs`) and name it in the config"
	switch {
	case rootFS == "":
		add(Item{Name: "root filesystem", Needed: "container", Detail: "none configured", Fix: rootfsFix})
	default:
		if err := checkRootFS(rootFS); err != nil {
			add(Item{Name: "root filesystem", Needed: "container", Detail: err.Error(), Fix: rootfsFix})
		} else {
			add(Item{Name: "root filesystem", Needed: "container", OK: true, Detail: rootFS})
		}
	}
	return r
}

// checkRootFS checks that dir looks like a root filesystem: a directory
// with a shell.
func checkRootFS(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	for _, sh := range []string{"bin/sh", "usr/bin/sh"} {
		if _, err := os.Lstat(filepath.Join(dir, sh)); err == nil {
			return nil
		}
	}
	return fmt.Errorf("%s has no bin/sh", dir)
}

func (r Report) find(name string) Item {
	for _, it := range r.Items {
		if it.Name == name {
			return it
		}
	}
	return Item{Name: name}
}

// Sandbox is nil when the sandbox level works, or says what is missing.
func (r Report) Sandbox() error {
	var errs []error
	for _, name := range []string{"bubblewrap", "user namespaces"} {
		if it := r.find(name); !it.OK {
			errs = append(errs, fmt.Errorf("%s: %s; fix: %s", name, it.Detail, it.Fix))
		}
	}
	return errors.Join(errs...)
}

// Container is nil when the container level works, or says what is
// missing.
func (r Report) Container() error {
	err := r.Sandbox()
	if it := r.find("root filesystem"); !it.OK {
		err = errors.Join(err, fmt.Errorf("root filesystem: %s; fix: %s", it.Detail, it.Fix))
	}
	return err
}

// String renders the report, one line per item, with the fix under each
// missing one.
func (r Report) String() string {
	var s strings.Builder
	for _, it := range r.Items {
		mark := "ok     "
		if !it.OK {
			mark = "MISSING"
		}
		fmt.Fprintf(&s, "%s %-16s %s (%s)\n", mark, it.Name, it.Detail, it.Needed)
		if !it.OK && it.Fix != "" {
			fmt.Fprintf(&s, "        fix: %s\n", it.Fix)
		}
	}
	return s.String()
}
