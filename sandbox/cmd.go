package sandbox

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
)

// Cmd is a command that runs in a box: an *exec.Cmd whose Start, Wait,
// Run, Output and CombinedOutput go through the box. Set its fields
// (Stdin, Stdout, Stderr, ExtraFiles...) as for exec.Cmd before starting
// it. When ctx ends, bwrap is killed and with it the whole sandbox.
type Cmd struct {
	*exec.Cmd
	box *Box
	end func() string
	// Note is set by Wait: why the sandbox stopped or hindered the
	// command (a limit, the hard timeout), or "".
	Note string
}

// Command returns a command running argv in the box, in dir (the
// workspace when empty), with env (the process's when nil).
func (b *Box) Command(ctx context.Context, argv []string, dir string, env []string) (*Cmd, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("sandbox: no program to run")
	}
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Dir = dir
	c.Env = env
	return &Cmd{Cmd: c, box: b}, nil
}

// Start starts the command in the box.
func (c *Cmd) Start() error {
	if c.end != nil {
		return errors.New("sandbox: already started")
	}
	end, err := c.box.Start(c.Cmd)
	if err != nil {
		return err
	}
	c.end = end
	return nil
}

// Wait waits for the command, then for everything it left in the sandbox
// to be killed: when it returns, nothing the command started is running.
func (c *Cmd) Wait() error {
	if c.end == nil {
		return errors.New("sandbox: not started")
	}
	err := c.Cmd.Wait()
	c.Note = c.end()
	return err
}

// Run starts the command and waits for it.
func (c *Cmd) Run() error {
	if err := c.Start(); err != nil {
		return err
	}
	return c.Wait()
}

// Output runs the command and returns its standard output.
func (c *Cmd) Output() ([]byte, error) {
	if c.Stdout != nil {
		return nil, errors.New("sandbox: Stdout already set")
	}
	var out bytes.Buffer
	c.Stdout = &out
	err := c.Run()
	return out.Bytes(), err
}

// CombinedOutput runs the command and returns its standard output and
// standard error together.
func (c *Cmd) CombinedOutput() ([]byte, error) {
	if c.Stdout != nil || c.Stderr != nil {
		return nil, errors.New("sandbox: Stdout or Stderr already set")
	}
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	return out.Bytes(), err
}
