#!/usr/bin/env bash
# A hook that never answers: it starts a sleeping grandchild, writes its
# pid to the file named by $1, and waits.
bash -c 'sleep 300 & echo $! > "$0.tmp" && mv "$0.tmp" "$0"; wait' "$1" &
wait
