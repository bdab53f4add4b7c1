// Package hook runs Claude Code hooks for deputy's instances: the hooks
// of Claude Code settings files and of a definition's front matter, with
// Claude Code's events, matchers, JSON input on stdin, environment,
// timeouts and answers, so a team's existing hook scripts work unchanged.
// It decides nothing about the loop: Runner.Run returns an Outcome the
// loop acts on (block a call, rewrite it, add context, send a stopping
// agent back, end the run).
//
// The behaviour follows Claude Code's hooks reference
// (https://code.claude.com/docs/en/hooks, read through public copies of
// it: its PreToolUse section for permissionDecision / updatedInput /
// permissionDecisionReason, its "exit code 2 behavior per event" table,
// the common JSON fields continue / stopReason / suppressOutput /
// systemMessage, hookSpecificOutput.additionalContext, stop_hook_active
// for Stop and SubagentStop, and its http hook type). Where this package
// decides something the reference leaves open, the doc of the thing says
// so.
//
// # Configuration
//
// LoadSettings reads the "hooks" key of the same settings files as
// permission.LoadSettings (permission.SettingsPaths); FromMarkdown reads
// a definition file's hooks front matter with the line of every entry,
// and FromFrontMatter the same as agentdef decoded it (for a definition
// with no file). All have Claude Code's shape:
//
//	{"hooks": {"PreToolUse": [{"matcher": "Bash|Edit", "hooks": [
//	    {"type": "command", "command": "$CLAUDE_PROJECT_DIR/.claude/hooks/check.sh", "timeout": 30},
//	    {"type": "http", "url": "http://127.0.0.1:8080/hook", "headers": {"Authorization": "Bearer $TOKEN"}, "allowedEnvVars": ["TOKEN"]}]}]}}
//
// A wrong entry is skipped and reported (Config.Skipped, file:line); the
// rest loads. Keys deputy does not use are ignored: statusMessage, once
// (such a hook runs every time its event comes) and async (such a hook is
// waited for like any other). The settings JSON is parsed here again rather than through
// permission's reader, which reads only its permissions key token by
// token: the files are small, and keeping the readers apart keeps the
// fail-closed rule of permission's deny rules its own.
//
// # Matchers
//
// Empty or "*" matches all; letters, digits, _ and | are exact names
// (Edit|Write); anything else is a regular expression searched for in the
// value (mcp__github__.*). Tool matchers are written with Claude Code's
// names and also match deputy's (Bash and bash). SubagentStart and
// SubagentStop match the agent type, PreCompact the trigger, SessionStart
// the source, SessionEnd the reason, Notification its type;
// UserPromptSubmit and Stop ignore matchers.
//
// # Running
//
// Every matching hook runs at once; a command or URL selected by several
// groups runs once. A command hook is `sh -c command` in the instance's
// directory, the leader of a process group of its own (through Starter,
// inside the instance's fence), with the event's JSON on stdin and
// CLAUDE_PROJECT_DIR set. At its timeout (60 s unless set) the whole
// group is killed, and when it exits anything it left in its group is
// killed too. Its stdout and stderr are kept up to Runner.MaxOutput each
// and the rest read and discarded. An http hook is a POST of the same
// JSON, sent by deputy itself rather than from inside the fence (the URL
// comes from settings, not from the model); a 2xx body is read as a
// command's stdout would be.
//
// # Answers
//
// Exit 0: stdout that is a JSON object is the answer; other stdout is
// plain text (context for UserPromptSubmit and SessionStart, output for
// the person otherwise). Output that starts with "{" but does not parse
// is read as plain text, as Claude Code does, and reported in Errors.
// Exit 2 blocks where the event can be blocked, stderr being the reason.
// Any other exit is a non-blocking error: the run goes on, the error is
// reported. A hook that cannot run (not executable: the shell's exit 126;
// not found: 127) is such an error too, as in Claude Code, whose hooks
// also run through a shell; so is a timeout.
//
// # Transcript
//
// Transcript writes the JSONL transcript hooks read through
// transcript_path, in Claude Code's line shape.
package hook
