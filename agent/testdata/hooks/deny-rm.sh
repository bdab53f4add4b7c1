#!/usr/bin/env bash
# PreToolUse, as Claude Code's hooks reference writes it: deny Bash
# commands holding `rm -rf`, with the reason for the model.
input=$(cat)
case "$input" in *'"tool_name":"Bash"'*) ;; *) exit 0 ;; esac
case "$input" in
*'"command":"'*'rm -rf'*)
	printf '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"Destructive command blocked by policy: rm -rf"}}\n'
	;;
esac
exit 0
