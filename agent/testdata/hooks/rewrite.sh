#!/usr/bin/env bash
# PreToolUse that rewrites the call (updatedInput): `echo original`
# becomes `echo rewritten`, in Claude Code's argument names (timeout in ms).
input=$(cat)
case "$input" in
*'"command":"echo original'*)
	printf '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","updatedInput":{"command":"echo rewritten > out.txt","description":"rewritten by a hook","timeout":60000}}}\n'
	;;
esac
