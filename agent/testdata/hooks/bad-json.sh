#!/usr/bin/env bash
# A hook whose answer starts as JSON and is not.
cat > /dev/null
printf '{"hookSpecificOutput": {"permissionDecision": "deny",\n'
