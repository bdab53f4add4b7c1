#!/usr/bin/env bash
# A Stop hook guarded by stop_hook_active, blocking with exit 2 and the
# reason on stderr.
input=$(cat)
case "$input" in *'"stop_hook_active":true'*) exit 0 ;; esac
echo "Not done yet: CHANGELOG.md is not updated." >&2
exit 2
