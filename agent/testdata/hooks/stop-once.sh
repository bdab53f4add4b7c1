#!/usr/bin/env bash
# Stop or SubagentStop that sends the agent back once, guarded by
# stop_hook_active; it logs each run to $1 (event, active, and the
# transcript's line count) and blocks with exit 2 and stderr, or with
# JSON when $2 is "json".
input=$(cat)
event=$(printf '%s' "$input" | sed -n 's/.*"hook_event_name":"\([A-Za-z]*\)".*/\1/p')
path=$(printf '%s' "$input" | sed -n 's/.*"transcript_path":"\([^"]*\)".*/\1/p')
lines=0
[ -n "$path" ] && [ -f "$path" ] && lines=$(wc -l < "$path" | tr -d ' ')
case "$input" in
*'"stop_hook_active":true'*)
	echo "$event active=true lines=$lines" >> "$1"
	exit 0
	;;
esac
echo "$event active=false lines=$lines" >> "$1"
if [ "$2" = json ]; then
	printf '{"decision":"block","reason":"Check your report against the task once more before you stop."}\n'
	exit 0
fi
echo "Not done yet: CHANGELOG.md is not updated." >&2
exit 2
