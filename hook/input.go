package hook

import (
	"encoding/json"
	"fmt"
	"path/filepath"
)

// Input is what a hook is told about an event, in deputy's terms; Runner
// turns it into the JSON Claude Code gives a hook on stdin (Claude Code's
// tool and argument names, absolute paths). Fields an event does not
// have stay empty and are left out of the JSON.
type Input struct {
	Event Event
	// SessionID is the instance's id.
	SessionID string
	// TranscriptPath is the JSONL transcript a Transcript writes for the
	// instance ("" when there is none).
	TranscriptPath string
	// Cwd is the directory the instance works in (its fence's, when
	// fenced); hooks run there. Runner.ProjectDir when empty.
	Cwd string
	// PermissionMode is Claude Code's name of the instance's mode
	// (default, plan, acceptEdits, dontAsk, bypassPermissions).
	PermissionMode string

	// PreToolUse and PostToolUse: deputy's tool name and arguments.
	Tool      string
	ToolInput json.RawMessage
	ToolUseID string
	// PostToolUse: what the tool gave back. ToolResponse, when set, is
	// sent as it is; otherwise Response builds one from ToolOutput.
	ToolOutput   string
	ToolError    bool
	ToolResponse json.RawMessage

	// UserPromptSubmit: the prompt.
	Prompt string
	// Stop and SubagentStop: true when the agent is going on because a
	// stop hook already sent it back once (hooks check it so as not to
	// send it back for ever).
	StopHookActive bool
	// LastAssistantMessage is the text of the agent's final message (Stop,
	// SubagentStop).
	LastAssistantMessage string
	// SubagentStart and SubagentStop: the child's id and type, and the
	// child's own transcript.
	AgentID, AgentType  string
	AgentTranscriptPath string
	// PreCompact: "manual" or "auto", and the instructions given.
	Trigger            string
	CustomInstructions string
	// SessionStart: startup, resume, clear or compact. SessionEnd's Reason:
	// clear, logout, prompt_input_exit or other.
	Source, Reason string
	// Notification.
	Message, Title, NotificationType string
}

// wire is the JSON a hook gets, with Claude Code's field names.
type wire struct {
	SessionID            string          `json:"session_id"`
	TranscriptPath       string          `json:"transcript_path"`
	Cwd                  string          `json:"cwd"`
	PermissionMode       string          `json:"permission_mode,omitempty"`
	HookEventName        Event           `json:"hook_event_name"`
	ToolName             string          `json:"tool_name,omitempty"`
	ToolInput            json.RawMessage `json:"tool_input,omitempty"`
	ToolResponse         json.RawMessage `json:"tool_response,omitempty"`
	ToolUseID            string          `json:"tool_use_id,omitempty"`
	Prompt               string          `json:"prompt,omitempty"`
	StopHookActive       *bool           `json:"stop_hook_active,omitempty"`
	LastAssistantMessage string          `json:"last_assistant_message,omitempty"`
	AgentID              string          `json:"agent_id,omitempty"`
	AgentType            string          `json:"agent_type,omitempty"`
	AgentTranscriptPath  string          `json:"agent_transcript_path,omitempty"`
	Trigger              string          `json:"trigger,omitempty"`
	CustomInstructions   *string         `json:"custom_instructions,omitempty"`
	Source               string          `json:"source,omitempty"`
	Reason               string          `json:"reason,omitempty"`
	Message              string          `json:"message,omitempty"`
	Title                string          `json:"title,omitempty"`
	NotificationType     string          `json:"notification_type,omitempty"`
}

// Encode renders in as the JSON a hook reads on stdin (and an http hook
// receives), with dir the directory paths are made absolute against.
func (in *Input) Encode(dir string) ([]byte, error) {
	w := wire{SessionID: in.SessionID, TranscriptPath: in.TranscriptPath, Cwd: in.Cwd, PermissionMode: in.PermissionMode,
		HookEventName: in.Event, Prompt: in.Prompt, LastAssistantMessage: in.LastAssistantMessage, AgentID: in.AgentID,
		AgentType: in.AgentType, AgentTranscriptPath: in.AgentTranscriptPath, Trigger: in.Trigger, Source: in.Source,
		Reason: in.Reason, Message: in.Message, Title: in.Title, NotificationType: in.NotificationType}
	if w.Cwd == "" {
		w.Cwd = dir
	}
	switch in.Event {
	case PreToolUse, PostToolUse:
		name, args, err := ToClaude(in.Tool, in.ToolInput, dir)
		if err != nil {
			return nil, fmt.Errorf("hook input: %w", err)
		}
		w.ToolName, w.ToolInput, w.ToolUseID = name, args, in.ToolUseID
		if len(w.ToolInput) == 0 {
			w.ToolInput = json.RawMessage("{}")
		}
		if in.Event == PostToolUse {
			w.ToolResponse = in.ToolResponse
			if len(w.ToolResponse) == 0 {
				w.ToolResponse = Response(in.Tool, in.ToolInput, in.ToolOutput, in.ToolError, dir)
			}
		}
	case Stop, SubagentStop:
		w.StopHookActive = &in.StopHookActive
	case PreCompact:
		w.CustomInstructions = &in.CustomInstructions
	}
	return marshal(w)
}

// Response builds a tool_response for a deputy tool's result in the
// shape Claude Code's tool of that name reports (what hooks read from it:
// Bash's stdout and stderr, Write's and Edit's filePath and success,
// Read's file content); any other tool gets {"output", "is_error"}.
// deputy's bash reports stdout and stderr together, so they are all in
// stdout.
func Response(tool string, input json.RawMessage, output string, isError bool, dir string) json.RawMessage {
	var args struct {
		Path string `json:"path"`
	}
	_ = json.Unmarshal(input, &args)
	p := args.Path
	if p != "" && dir != "" && !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	var v any
	switch tool {
	case "bash":
		v = struct {
			Stdout      string `json:"stdout"`
			Stderr      string `json:"stderr"`
			Interrupted bool   `json:"interrupted"`
			IsError     bool   `json:"is_error,omitempty"`
		}{Stdout: output, IsError: isError}
	case "write_file", "edit_file":
		v = struct {
			FilePath string `json:"filePath"`
			Success  bool   `json:"success"`
			Output   string `json:"output,omitempty"`
		}{p, !isError, output}
	case "read_file":
		type file struct {
			FilePath string `json:"filePath"`
			Content  string `json:"content"`
		}
		v = struct {
			Type    string `json:"type"`
			File    file   `json:"file"`
			IsError bool   `json:"is_error,omitempty"`
		}{"text", file{p, output}, isError}
	default:
		v = struct {
			Output  string `json:"output"`
			IsError bool   `json:"is_error"`
		}{output, isError}
	}
	b, _ := marshal(v)
	return b
}
