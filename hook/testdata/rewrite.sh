#!/usr/bin/env bash
# A PreToolUse hook that rewrites the call: `go test` always runs with
# -race, with a 5-minute timeout (Claude Code's Bash timeout is in ms).
input=$(cat)
cmd=$(printf '%s' "$input" | sed -n 's/.*"command":"\([^"]*\)".*/\1/p')
case "$cmd" in
"go test"*)
	new=$(printf '%s' "$cmd" | sed 's/^go test/go test -race/')
	printf '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"race detector added","updatedInput":{"command":"%s","description":"tests with -race","timeout":300000}}}\n' "$new"
	;;
esac
