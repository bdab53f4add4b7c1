#!/usr/bin/env bash
# A hook that never answers.
exec sleep 300
