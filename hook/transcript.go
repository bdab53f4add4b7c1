package hook

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/llm"
)

// Transcript writes an instance's conversation as Claude Code's JSONL
// transcript, the file a hook's transcript_path names: one JSON object a
// line per message, {"parentUuid", "isSidechain", "userType", "cwd",
// "sessionId", "version", "type": "user"|"assistant", "message": {"role",
// "content": [blocks]}, "uuid", "timestamp"}, each line's parentUuid the
// uuid of the line before, tool calls in Claude Code's tool and argument
// names (ToClaude). Hook scripts that read transcripts (the last
// assistant message, the tools used) read it as they read Claude Code's.
//
// The file is only appended to, each Append or Sync in one write(2) of
// whole lines to a file opened O_APPEND. The agent loop appends before it
// runs an event's hooks, so a hook, which runs after the write returned,
// never sees a partial line; a reader racing a write may see the last
// line unfinished, and a line without its newline is not yet whole. The
// file is created 0600: a transcript holds what the tools read.
type Transcript struct {
	mu    sync.Mutex
	f     *os.File
	path  string
	opt   TranscriptOptions
	last  string // uuid of the last line written
	n     int    // messages of the current (since compaction) conversation written
	dirty bool   // the file does not end with a newline (a write cut by a crash)
}

// TranscriptOptions says whose transcript it is.
type TranscriptOptions struct {
	SessionID string
	Cwd       string // also the directory tool paths are made absolute against
	// AgentID marks a subagent's transcript (Claude Code's isSidechain
	// and agentId).
	AgentID string
	Clock   clock.Clock // timestamps (clock.Real)
}

// OpenTranscript opens (creating it and its directory if needed) the
// transcript at path. An existing file is continued: the chain of uuids
// goes on from its last line, and a line a crash left unfinished is
// closed first, so appends start on a line of their own.
func OpenTranscript(path string, opt TranscriptOptions) (*Transcript, error) {
	if opt.Clock == nil {
		opt.Clock = clock.Real
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("transcript: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("transcript: %w", err)
	}
	t := &Transcript{f: f, path: path, opt: opt}
	if err := t.resume(); err != nil {
		f.Close()
		return nil, fmt.Errorf("transcript %s: %w", path, err)
	}
	return t, nil
}

// resume reads an existing file's last uuid and how many messages follow
// its last compaction boundary.
func (t *Transcript) resume() error {
	if _, err := t.f.Seek(0, 0); err != nil {
		return err
	}
	sc := bufio.NewScanner(t.f)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var lastByte byte = '\n'
	for sc.Scan() {
		line := sc.Bytes()
		var l struct {
			Type, Subtype, UUID string
		}
		if json.Unmarshal(line, &l) != nil || l.UUID == "" {
			continue
		}
		t.last = l.UUID
		switch {
		case l.Type == "user" || l.Type == "assistant":
			t.n++
		case l.Type == "system" && l.Subtype == "compact_boundary":
			t.n = 0
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if fi, err := t.f.Stat(); err == nil && fi.Size() > 0 {
		b := make([]byte, 1)
		if _, err := t.f.ReadAt(b, fi.Size()-1); err == nil {
			lastByte = b[0]
		}
	}
	t.dirty = lastByte != '\n'
	return nil
}

// Path is the transcript's file, what transcript_path carries.
func (t *Transcript) Path() string { return t.path }

// Written is how many messages of the current conversation (since the
// last compaction) the file holds: a run replayed after a crash, whose
// conversation grows again from its start, syncs only once it is longer.
func (t *Transcript) Written() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

// Close closes the file.
func (t *Transcript) Close() error { return t.f.Close() }

// Append writes messages after those written so far.
func (t *Transcript) Append(msgs ...llm.Message) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var buf bytes.Buffer
	for _, m := range msgs {
		t.line(&buf, string(m.Role), &m, "")
	}
	return t.write(&buf, len(msgs))
}

// Sync brings the file up to date with the whole conversation so far:
// the messages of all past those written. A conversation shorter than
// what was written has been compacted: a compact_boundary line is
// written (as Claude Code does) and all of it follows.
func (t *Transcript) Sync(all []llm.Message) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var buf bytes.Buffer
	from := t.n
	if len(all) < t.n {
		t.line(&buf, "system", nil, "compact_boundary")
		t.n, from = 0, 0
	}
	for i := from; i < len(all); i++ {
		t.line(&buf, string(all[i].Role), &all[i], "")
	}
	return t.write(&buf, len(all)-from)
}

// Compacted records a compaction the caller knows of (Sync sees one only
// when the conversation got shorter): a compact_boundary line, then the
// whole new conversation.
func (t *Transcript) Compacted(all []llm.Message) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var buf bytes.Buffer
	t.line(&buf, "system", nil, "compact_boundary")
	t.n = 0
	for i := range all {
		t.line(&buf, string(all[i].Role), &all[i], "")
	}
	return t.write(&buf, len(all))
}

func (t *Transcript) write(buf *bytes.Buffer, msgs int) error {
	if buf.Len() == 0 {
		return nil
	}
	b := buf.Bytes()
	if t.dirty {
		b = append([]byte{'\n'}, b...)
	}
	if _, err := t.f.Write(b); err != nil {
		return fmt.Errorf("transcript %s: %w", t.path, err)
	}
	t.dirty = false
	t.n += msgs
	return nil
}

// transcriptLine is one line, its fields in Claude Code's order.
type transcriptLine struct {
	ParentUUID  *string        `json:"parentUuid"`
	IsSidechain bool           `json:"isSidechain"`
	UserType    string         `json:"userType"`
	Cwd         string         `json:"cwd"`
	SessionID   string         `json:"sessionId"`
	Version     string         `json:"version"`
	AgentID     string         `json:"agentId,omitempty"`
	Type        string         `json:"type"`
	Subtype     string         `json:"subtype,omitempty"`
	Content     string         `json:"content,omitempty"`
	Message     *transcriptMsg `json:"message,omitempty"`
	UUID        string         `json:"uuid"`
	Timestamp   string         `json:"timestamp"`
}

type transcriptMsg struct {
	Role    string            `json:"role"`
	Content []json.RawMessage `json:"content"`
}

// line appends one line for m (or a system line of subtype) to buf.
func (t *Transcript) line(buf *bytes.Buffer, typ string, m *llm.Message, subtype string) {
	l := transcriptLine{IsSidechain: t.opt.AgentID != "", UserType: "external", Cwd: t.opt.Cwd, SessionID: t.opt.SessionID,
		Version: "deputy", AgentID: t.opt.AgentID, Type: typ, Subtype: subtype, UUID: newUUID(),
		Timestamp: t.opt.Clock.Now().UTC().Format(time.RFC3339Nano)}
	if t.last != "" {
		p := t.last
		l.ParentUUID = &p
	}
	if subtype == "compact_boundary" {
		l.Content = "Conversation compacted"
	}
	if m != nil {
		l.Message = &transcriptMsg{Role: string(m.Role), Content: make([]json.RawMessage, 0, len(m.Content))}
		for i := range m.Content {
			l.Message.Content = append(l.Message.Content, t.block(&m.Content[i]))
		}
	}
	b, err := marshal(l)
	if err != nil { // a block's Raw that is not JSON: keep the line, without it
		l.Message.Content = nil
		b, _ = marshal(l)
	}
	buf.Write(b)
	buf.WriteByte('\n')
	t.last = l.UUID
}

// block renders a block as Claude Code's transcript has it.
func (t *Transcript) block(b *llm.Block) json.RawMessage {
	var v any
	switch b.Type {
	case llm.TypeText:
		v = struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{b.Type, b.Text}
	case llm.TypeToolUse:
		name, input, err := ToClaude(b.Name, b.Input, t.opt.Cwd)
		if err != nil || !json.Valid(input) {
			name, input = b.Name, json.RawMessage("{}")
		}
		v = struct {
			Type  string          `json:"type"`
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		}{b.Type, b.ID, name, input}
	case llm.TypeToolResult:
		v = struct {
			Type      string `json:"type"`
			ToolUseID string `json:"tool_use_id"`
			Content   string `json:"content"`
			IsError   bool   `json:"is_error,omitempty"`
		}{b.Type, b.ToolUseID, b.Text, b.IsError}
	default:
		if len(b.Raw) > 0 && json.Valid(b.Raw) {
			return b.Raw
		}
		v = struct {
			Type string `json:"type"`
		}{b.Type}
	}
	out, _ := marshal(v)
	return out
}

// newUUID is a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
