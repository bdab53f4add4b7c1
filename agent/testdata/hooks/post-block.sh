#!/usr/bin/env bash
# PostToolUse that blocks with feedback when a test run failed.
input=$(cat)
case "$input" in
*'"tool_response":'*FAIL*)
	printf '{"decision":"block","reason":"The tests failed: fix them before going on.","hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"failing package: ./store"}}\n'
	;;
esac
