package fstool_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/tool/fstool"
)

func numbered(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

func TestReadFile(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	mustWrite(t, filepath.Join(ws, "ten.txt"), numbered(1, 10))
	mustWrite(t, filepath.Join(ws, "crlf.txt"), "a\r\nb\r\n")
	mustWrite(t, filepath.Join(ws, "nofinal.txt"), "x\ny")
	mustWrite(t, filepath.Join(ws, "empty.txt"), "")
	mustWrite(t, filepath.Join(ws, "bin.dat"), "ELF\x00\x01\x02")
	mustWrite(t, filepath.Join(ws, "latin1.txt"), "caf\xe9\n")
	mkdir(t, filepath.Join(ws, "sub"))
	set := newSet(t, ws)

	tests := []struct {
		name    string
		args    map[string]any
		want    string
		wantErr bool
	}{
		{"whole", map[string]any{"path": "ten.txt"}, "     1\tline 1\n     2\tline 2\n", false},
		{"last line has number", map[string]any{"path": "ten.txt"}, "    10\tline 10\n", false},
		{"offset and limit", map[string]any{"path": "ten.txt", "offset": 3, "limit": 2},
			"     3\tline 3\n     4\tline 4\n[showing lines 3-4 of 10; 6 more lines remain: continue with offset=5]\n", false},
		{"offset to end has no note", map[string]any{"path": "ten.txt", "offset": 9}, "     9\tline 9\n    10\tline 10\n", false},
		{"crlf stripped", map[string]any{"path": "crlf.txt"}, "     1\ta\n     2\tb\n", false},
		{"no final newline", map[string]any{"path": "nofinal.txt"}, "     2\ty\n", false},
		{"empty", map[string]any{"path": "empty.txt"}, "(empty.txt is empty)", false},
		{"invalid utf8 shown replaced", map[string]any{"path": "latin1.txt"}, "caf\uFFFD", false},
		{"binary refused", map[string]any{"path": "bin.dat"}, "bin.dat is a binary file", true},
		{"offset past end", map[string]any{"path": "ten.txt", "offset": 11}, "offset 11 is past the end of ten.txt, which has 10 lines", true},
		{"directory", map[string]any{"path": "sub"}, "sub is a directory; use glob", true},
		{"missing", map[string]any{"path": "nope.txt"}, "nope.txt: no such file or directory", true},
		{"offset zero rejected by schema", map[string]any{"path": "ten.txt", "offset": 0}, "invalid arguments for read_file: at /offset:", true},
		{"unknown field rejected by schema", map[string]any{"path": "ten.txt", "lines": 3}, "additional properties 'lines' not allowed", true},
		{"path required", map[string]any{}, "missing property 'path'", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, isErr := callTool(t, set, "read_file", tc.args)
			if isErr != tc.wantErr || !strings.Contains(out, tc.want) {
				t.Errorf("got (%q, err=%v), want %q (err=%v)", out, isErr, tc.want, tc.wantErr)
			}
		})
	}
	// The whole file comes back exactly, with no note.
	out, _ := callTool(t, set, "read_file", map[string]any{"path": "ten.txt"})
	if strings.Count(out, "\n") != 10 || strings.Contains(out, "[") {
		t.Errorf("whole file: %q", out)
	}
}

func TestReadFileLimits(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	mustWrite(t, filepath.Join(ws, "long.txt"), numbered(1, 50))
	long := strings.Repeat("é", 100) + "\n" // 200 bytes of 2-byte characters
	mustWrite(t, filepath.Join(ws, "wide.txt"), long+"short\n")
	set := newSetLimits(t, ws, fstool.Limits{ReadLines: 20, LineChars: 51, OutputChars: 200})

	// Default line cap: 20 lines, then the note (the output cap is 200 bytes,
	// so lines stop earlier; the note says so and where to go on).
	out, isErr := callTool(t, set, "read_file", map[string]any{"path": "long.txt"})
	if isErr {
		t.Fatal(out)
	}
	if !strings.Contains(out, "(output size limit)") || !strings.Contains(out, "of 50") {
		t.Errorf("output cap note missing: %q", out)
	}
	var last int
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		fmt.Sscanf(strings.TrimSpace(l), "%d", &last)
	}
	if !strings.Contains(out, fmt.Sprintf("continue with offset=%d]", last+1)) {
		t.Errorf("note does not continue after line %d: %q", last, out)
	}

	// A limit above the maximum is clamped, and the note gives the rest.
	set = newSetLimits(t, ws, fstool.Limits{ReadLines: 20})
	out, _ = callTool(t, set, "read_file", map[string]any{"path": "long.txt", "limit": 500})
	if !strings.Contains(out, "    20\tline 20\n[showing lines 1-20 of 50; 30 more lines remain: continue with offset=21]") {
		t.Errorf("clamp: %q", out)
	}

	// Long lines are cut on a character boundary, with the cut size.
	set = newSetLimits(t, ws, fstool.Limits{LineChars: 51})
	out, _ = callTool(t, set, "read_file", map[string]any{"path": "wide.txt"})
	want := "     1\t" + strings.Repeat("é", 25) + " [... 150 more bytes on this line]\n     2\tshort\n"
	if out != want {
		t.Errorf("got %q\nwant %q", out, want)
	}
}

func TestReadFileHugeFileIsNotCounted(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	mustWrite(t, filepath.Join(ws, "log"), numbered(1, 100)) // 792 bytes
	set := newSetLimits(t, ws, fstool.Limits{MaxFileBytes: 500})
	out, _ := callTool(t, set, "read_file", map[string]any{"path": "log", "offset": 10, "limit": 2})
	want := "    10\tline 10\n    11\tline 11\n[showing lines 10-11 of a 792-byte file; more lines remain: continue with offset=12]\n"
	if out != want {
		t.Errorf("got %q", out)
	}
	out, _ = callTool(t, set, "read_file", map[string]any{"path": "log", "offset": 99})
	if out != "    99\tline 99\n   100\tline 100\n" {
		t.Errorf("end: %q", out)
	}
}

func TestReadFileHugeLine(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	// One line bigger than the reader's buffer must not fail.
	mustWrite(t, filepath.Join(ws, "min.js"), strings.Repeat("x", 300_000)+"\nend\n")
	set := newSetLimits(t, ws, fstool.Limits{LineChars: 10})
	out, isErr := callTool(t, set, "read_file", map[string]any{"path": "min.js"})
	if isErr || out != "     1\txxxxxxxxxx [... 299990 more bytes on this line]\n     2\tend\n" {
		t.Errorf("%q %v", out, isErr)
	}
}

func TestReadFileNotRegular(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	if err := mkfifo(filepath.Join(ws, "fifo")); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	set := newSet(t, ws)
	out, isErr := callTool(t, set, "read_file", map[string]any{"path": "fifo"})
	if !isErr || !strings.Contains(out, "not a regular file") {
		t.Errorf("%q %v", out, isErr)
	}
	_ = os.Remove(filepath.Join(ws, "fifo"))
}
