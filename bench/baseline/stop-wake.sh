#!/usr/bin/env bash
# Baseline for a `stop-gate` Stop that ends a loop: the bash+jq way, the promise matched, the
# state marked passed, and a wake written (a file per wake, renamed into the queue).
# Usage: stop-wake.sh STATE_FILE QUEUE_DIR < hook.json
set -u
state=$1
queue=$2
input=$(cat)
[ -f "$state" ] || exit 0
promise=$(jq -r '.completion_promise' "$state")
message=$(jq -r '.last_assistant_message // empty' <<<"$input")
found=$(printf '%s' "$message" | perl -0777 -ne 'print $1 if /<promise>(.*?)<\/promise>/s' | tr -s '[:space:]' ' ' | sed 's/^ //; s/ $//')
[ -n "$found" ] && [ "$found" = "$promise" ] || exit 0
jq '.status = "passed"' "$state" >"$state.tmp" && mv "$state.tmp" "$state"
mkdir -p "$queue"
wake=$queue/$(date +%s%N).json
jq -n --arg s "$(jq -r '.session_id' "$state")" '{kind: "loop", session_id: $s, status: "passed"}' >"$wake.tmp" && mv "$wake.tmp" "$wake"
jq -n '{systemMessage: "loop passed"}'
