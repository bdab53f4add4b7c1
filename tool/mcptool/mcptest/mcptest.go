// Package mcptest is a real MCP server for tests of deputy's MCP client: a
// test binary runs it over stdio by starting itself again (MaybeServe at
// the top of its TestMain, Command for the command line), and serves it
// over HTTP with mcp.NewStreamableHTTPHandler (NewServer). Its tools:
//
//   - add {a, b}: a+b, marked read-only;
//   - secret_write {text}: appends text to DIR/calls and says how many
//     lines it holds (a side effect a test can count);
//   - env {name}: the value of an environment variable of the server;
//   - pid: the server's process id;
//   - fail: a result marked isError;
//   - picture: an image and a caption;
//   - block: tells the test it was entered (a TCP dial to Notify, or the
//     Entered channel), then waits until the call is cancelled.
package mcptest

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Arg, first among a test binary's arguments, makes it an MCP server.
const Arg = "deputy-mcptest-server"

// Modes of a stdio server.
const (
	ModeServe = "serve" // serve the tools
	ModeHang  = "hang"  // read stdin and never answer
	ModeDie   = "die"   // say something on stderr and exit 3 at once
)

// Options configure a server.
type Options struct {
	Dir     string        // where secret_write keeps its calls
	Notify  string        // a TCP address block dials when entered
	Entered chan struct{} // in process: block sends to it when entered (buffered, or someone must receive)
	Left    chan struct{} // in process: block sends to it when its call was cancelled (the same)
}

// MaybeServe runs the server and exits when the process was started by
// Command; otherwise it returns at once. Call it first in TestMain.
func MaybeServe() {
	if len(os.Args) < 3 || os.Args[1] != Arg {
		return
	}
	mode, rest := os.Args[2], os.Args[3:]
	opts := Options{}
	if len(rest) > 0 {
		opts.Dir = rest[0]
	}
	if len(rest) > 1 {
		opts.Notify = rest[1]
	}
	os.Exit(serve(mode, opts))
}

// Command is the command line that starts this test binary as a stdio
// server in mode, keeping its calls in dir and dialing notify (may be "")
// when block is entered.
func Command(mode, dir, notify string) (string, []string) {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	return exe, []string{Arg, mode, dir, notify}
}

func serve(mode string, opts Options) int {
	switch mode {
	case ModeHang:
		_, _ = io.Copy(io.Discard, os.Stdin)
		return 0
	case ModeDie:
		fmt.Fprintf(os.Stderr, "starting\nfatal: token %q refused by upstream\n", os.Getenv("MCPTEST_TOKEN"))
		return 3
	}
	err := NewServer(opts).Run(context.Background(), &mcp.StdioTransport{})
	if err != nil && !strings.Contains(err.Error(), "EOF") {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

type addIn struct {
	A float64 `json:"a" jsonschema:"the first number"`
	B float64 `json:"b" jsonschema:"the second number"`
}

type writeIn struct {
	Text string `json:"text"`
}

type envIn struct {
	Name string `json:"name"`
}

type none struct{}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// NewServer is the test server with its tools.
func NewServer(opts Options) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "mcptest", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Add two numbers.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, any, error) {
			return text(strconv.FormatFloat(in.A+in.B, 'f', -1, 64)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "secret_write", Description: "Append a line to the calls file."},
		func(_ context.Context, _ *mcp.CallToolRequest, in writeIn) (*mcp.CallToolResult, any, error) {
			n, err := appendCall(opts.Dir, in.Text)
			if err != nil {
				return nil, nil, err
			}
			return text(fmt.Sprintf("written; %d calls so far", n)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "env", Description: "An environment variable of the server."},
		func(_ context.Context, _ *mcp.CallToolRequest, in envIn) (*mcp.CallToolResult, any, error) {
			v, ok := os.LookupEnv(in.Name)
			if !ok {
				return text(in.Name + " is not set"), nil, nil
			}
			return text(in.Name + "=" + v), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "pid", Description: "The server's process id."},
		func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			return text(strconv.Itoa(hostPID())), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Fail on purpose."},
		func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			r := text("it failed on purpose")
			r.IsError = true
			return r, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "picture", Description: "A picture and its caption."},
		func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.ImageContent{MIMEType: "image/png", Data: []byte("\x89PNG fake")},
				&mcp.TextContent{Text: "a caption"},
			}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "block", Description: "Wait until cancelled."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
			if opts.Notify != "" {
				if c, err := net.DialTimeout("tcp", opts.Notify, 10*time.Second); err == nil {
					_ = c.Close()
				}
			}
			if opts.Entered != nil {
				opts.Entered <- struct{}{}
			}
			<-ctx.Done()
			if opts.Left != nil {
				opts.Left <- struct{}{}
			}
			return nil, nil, ctx.Err()
		})
	return s
}

func appendCall(dir, line string) (int, error) {
	if dir == "" {
		return 0, fmt.Errorf("no directory for calls")
	}
	f, err := os.OpenFile(filepath.Join(dir, "calls"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, err
	}
	if _, err := fmt.Fprintln(f, line); err != nil {
		f.Close()
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	return Calls(dir), nil
}

// Calls is how many secret_write calls dir holds.
func Calls(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "calls"))
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "\n")
}

// hostPID is the server's pid as the tests see it. A server deputy
// started tethered is pid 1 of a PID namespace of its own, where getpid
// says 1; /proc, still the host's procfs, names it by its host pid.
func hostPID() int {
	if b, err := os.ReadFile("/proc/self/stat"); err == nil {
		var pid int
		if _, err := fmt.Sscan(string(b), &pid); err == nil {
			return pid
		}
	}
	return os.Getpid()
}
