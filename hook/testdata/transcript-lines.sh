#!/usr/bin/env bash
# Reads the transcript a hook is given: says how many lines it has and
# whether the last one is whole JSON (ends with a closing brace).
input=$(cat)
path=$(printf '%s' "$input" | sed -n 's/.*"transcript_path":"\([^"]*\)".*/\1/p')
n=$(wc -l < "$path")
last=$(tail -n 1 "$path")
case "$last" in *'}') whole=yes ;; *) whole=no ;; esac
case "$(head -n 1 "$path")" in *'"type":"user"'*'"sessionId":"s1"'*|*'"sessionId":"s1"'*'"type":"user"'*) first=user ;; *) first=other ;; esac
echo "lines=$n whole=$whole first=$first"
