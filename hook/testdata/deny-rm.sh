#!/usr/bin/env bash
# A PreToolUse hook as Claude Code's docs write them: read the call on
# stdin, deny Bash commands that hold `rm -rf`. No jq: sed pulls the
# command out of the one-line JSON.
input=$(cat)
case "$input" in *'"tool_name":"Bash"'*) ;; *) exit 0 ;; esac
cmd=$(printf '%s' "$input" | sed -n 's/.*"tool_input":{"command":"\([^"]*\)".*/\1/p')
case "$cmd" in
*"rm -rf"*)
	printf '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"Destructive command blocked by policy: rm -rf"}}\n'
	;;
esac
exit 0
