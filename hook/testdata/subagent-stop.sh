#!/usr/bin/env bash
# A SubagentStop hook that sends the child back once: when it stops the
# first time it is told to check its work; when it stops again
# (stop_hook_active) it may.
input=$(cat)
case "$input" in *'"stop_hook_active":true'*) exit 0 ;; esac
printf '{"decision":"block","reason":"Check your report against the task once more before you stop."}\n'
