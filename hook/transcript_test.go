package hook

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
)

type line struct {
	ParentUUID  *string `json:"parentUuid"`
	IsSidechain bool    `json:"isSidechain"`
	Cwd         string  `json:"cwd"`
	SessionID   string  `json:"sessionId"`
	AgentID     string  `json:"agentId"`
	Type        string  `json:"type"`
	Subtype     string  `json:"subtype"`
	Message     *struct {
		Role    string            `json:"role"`
		Content []json.RawMessage `json:"content"`
	} `json:"message"`
	UUID      string `json:"uuid"`
	Timestamp string `json:"timestamp"`
}

func readLines(t *testing.T, path string) []line {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []line
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %d %q: %v", len(out)+1, sc.Text(), err)
		}
		out = append(out, l)
	}
	return out
}

func TestTranscriptShape(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "t", "s1.jsonl")
	fc := clock.NewFake(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	tr, err := OpenTranscript(p, TranscriptOptions{SessionID: "s1", Cwd: "/w", AgentID: "c1", Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	conv := []llm.Message{
		llm.UserText("read a.go"),
		{Role: llm.Assistant, Content: []llm.Block{
			llm.Opaque("thinking", json.RawMessage(`{"type":"thinking","thinking":"hm","signature":"sig"}`)),
			llm.ToolUse("t1", "read_file", json.RawMessage(`{"path":"a.go"}`))}},
		{Role: llm.User, Content: []llm.Block{llm.ToolResult("t1", "package a", false)}},
	}
	if err := tr.Append(conv...); err != nil {
		t.Fatal(err)
	}
	if err := tr.Sync(conv); err != nil { // nothing new
		t.Fatal(err)
	}
	ls := readLines(t, p)
	if len(ls) != 3 {
		t.Fatalf("%d lines", len(ls))
	}
	if ls[0].ParentUUID != nil || *ls[1].ParentUUID != ls[0].UUID || *ls[2].ParentUUID != ls[1].UUID || len(ls[0].UUID) != 36 {
		t.Errorf("chain: %+v", ls)
	}
	if ls[0].Type != "user" || ls[1].Type != "assistant" || ls[1].Message.Role != "assistant" || ls[0].SessionID != "s1" ||
		ls[0].Cwd != "/w" || !ls[0].IsSidechain || ls[0].AgentID != "c1" || ls[0].Timestamp != "2026-12-02T10:00:00Z" {
		t.Errorf("fields: %+v", ls[0])
	}
	for i, want := range []string{
		`{"type":"text","text":"read a.go"}`,
		`{"type":"thinking","thinking":"hm","signature":"sig"}`,
		`{"type":"tool_use","id":"t1","name":"Read","input":{"file_path":"/w/a.go"}}`,
		`{"type":"tool_result","tool_use_id":"t1","content":"package a"}`,
	} {
		got := [][]json.RawMessage{ls[0].Message.Content, ls[1].Message.Content, ls[1].Message.Content, ls[2].Message.Content}[i]
		k := []int{0, 0, 1, 0}[i]
		if string(got[k]) != want {
			t.Errorf("block %d: %s, want %s", i, got[k], want)
		}
	}
	// Compaction: a shorter conversation writes a boundary, then all of it.
	if err := tr.Sync([]llm.Message{llm.UserText("summary"), conv[1]}); err != nil {
		t.Fatal(err)
	}
	tr.Close()
	ls = readLines(t, p)
	if len(ls) != 6 || ls[3].Type != "system" || ls[3].Subtype != "compact_boundary" || *ls[4].ParentUUID != ls[3].UUID {
		t.Fatalf("after compaction: %+v", ls[3:])
	}
	// Reopened after a crash that cut a line: appends start on a line of
	// their own and the chain goes on from the last whole line.
	f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	_, _ = f.WriteString(`{"type":"user","mess`)
	f.Close()
	tr, err = OpenTranscript(p, TranscriptOptions{SessionID: "s1", Cwd: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if tr.n != 2 {
		t.Errorf("resumed count %d, want 2 (since the boundary)", tr.n)
	}
	if err := tr.Sync([]llm.Message{llm.UserText("summary"), conv[1], conv[2]}); err != nil {
		t.Fatal(err)
	}
	if err := tr.Compacted([]llm.Message{llm.UserText("s2"), conv[1], conv[2]}); err != nil {
		t.Fatal(err)
	}
	if tr.n != 3 {
		t.Errorf("after Compacted: %d", tr.n)
	}
	raw, _ := os.ReadFile(p)
	var last line
	lines := splitLines(raw)
	var boundary line
	if len(lines) != 12 || json.Unmarshal(lines[7], &last) != nil || *last.ParentUUID != ls[5].UUID || last.Type != "user" ||
		json.Unmarshal(lines[8], &boundary) != nil || boundary.Subtype != "compact_boundary" || *boundary.ParentUUID != last.UUID {
		t.Fatalf("after resume: %d lines, last %s", len(lines), lines[len(lines)-1])
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
}

func splitLines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != '\n' {
			i++
		}
		out = append(out, b[:i])
		if i < len(b) {
			i++
		}
		b = b[i:]
	}
	return out
}

// TestTranscriptWholeLines: a reader racing appends sees only whole lines,
// save perhaps an unfinished last one (no newline yet).
func TestTranscriptWholeLines(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "s.jsonl")
	tr, err := OpenTranscript(p, TranscriptOptions{SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	big := llm.UserText(stringsRepeat("x", 40_000))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			raw, _ := os.ReadFile(p)
			ls := splitLines(raw)
			for i, l := range ls {
				if i == len(ls)-1 && len(raw) > 0 && raw[len(raw)-1] != '\n' {
					break // the line being written
				}
				if !json.Valid(l) {
					t.Errorf("line %d is not whole", i)
					return
				}
			}
		}
	})
	for range 20 {
		if err := tr.Append(big, llm.UserText("small")); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
}

func stringsRepeat(s string, n int) string {
	b := make([]byte, 0, len(s)*n)
	for range n {
		b = append(b, s...)
	}
	return string(b)
}
