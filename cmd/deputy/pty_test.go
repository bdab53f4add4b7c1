package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair (Linux's /dev/ptmx): the test
// reads the master, the program writes the terminal.
func openPTY(t *testing.T) (master, term *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Fatalf("unlock the pty: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Fatalf("pty number: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Fatalf("open the pty's terminal: %v", err)
	}
	return m, s
}

// runOnTerminal runs deputy with stderr on a pseudo-terminal (stdout a
// pipe) and returns everything written to the terminal, and stdout.
func runOnTerminal(t *testing.T, env []string, args ...string) (term, stdout string) {
	t.Helper()
	master, tty := openPTY(t)
	defer master.Close()
	cmd := exec.Command(bin, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "DEPUTY_FAKE_LATENCY=off", "TERM=xterm"}, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, tty
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close() // the child holds it now; the master reads EIO once the child lets go
	read := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(master) // ends with EIO when the terminal closes
		read <- b
	}()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out.String())
	}
	return string(<-read), out.String()
}

// deputy run on a terminal: a status line with a spinner and the time
// elapsed, coloured ends; the same run on a pipe, with NO_COLOR or with
// --no-color: not one escape byte.
func TestRunOnATerminalAndOnAPipe(t *testing.T) {
	t.Parallel()
	term, stdout := runOnTerminal(t, nil, "run", "--model", "fake", "count files")
	for _, want := range []string{"\r\x1b[K", "working", "\x1b[32mcompleted\x1b[0m", "subagent"} {
		if !strings.Contains(term, want) {
			t.Errorf("the terminal got no %q:\n%q", want, term)
		}
	}
	if !regexp.MustCompile(`⠋\x1b\[0m working[^\n]* \x1b\[2m\d+\.\ds\x1b\[0m`).MatchString(term) {
		t.Errorf("no spinner with the time elapsed:\n%q", term)
	}
	if strings.Contains(stdout, "\x1b") || !strings.Contains(stdout, "count files") {
		t.Errorf("stdout, a pipe, got escapes or no answer: %q", stdout)
	}
	for _, c := range []struct {
		env  []string
		args []string
	}{
		{[]string{"NO_COLOR=1"}, nil},
		{nil, []string{"--no-color"}},
	} {
		term, _ := runOnTerminal(t, c.env, append([]string{"run", "--model", "fake"}, append(c.args, "count files")...)...)
		if strings.Contains(term, "\x1b") || !strings.Contains(term, "completed") {
			t.Errorf("%v %v: escapes on the terminal, or no progress:\n%q", c.env, c.args, term)
		}
	}
	_, errOut, code := deputy(t, t.TempDir(), nil, "run", "--model", "fake", "count files")
	if code != 0 || strings.Contains(errOut, "\x1b") || !strings.Contains(errOut, "completed in") {
		t.Errorf("on a pipe: exit %d, escapes or no progress:\n%q", code, errOut)
	}
}
