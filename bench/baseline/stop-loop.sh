#!/usr/bin/env bash
# Baseline for `stop-gate` with a loop: the bash+jq way today's Ralph-loop Stop hooks work.
# Reads the state, reads the message, matches the promise, updates the state, prints the
# block. Usage: stop-loop.sh STATE_FILE < hook.json
set -u
state=$1
input=$(cat)
[ -f "$state" ] || exit 0
iteration=$(jq -r '.iteration' "$state")
max=$(jq -r '.max_iterations' "$state")
promise=$(jq -r '.completion_promise' "$state")
message=$(jq -r '.last_assistant_message // empty' <<<"$input")
found=$(printf '%s' "$message" | perl -0777 -ne 'print $1 if /<promise>(.*?)<\/promise>/s' | tr -s '[:space:]' ' ' | sed 's/^ //; s/ $//')
if [ -n "$found" ] && [ "$found" = "$promise" ]; then
  jq '.status = "passed"' "$state" >"$state.tmp" && mv "$state.tmp" "$state"
  exit 0
fi
if [ "$iteration" -ge "$max" ]; then
  jq '.status = "aborted"' "$state" >"$state.tmp" && mv "$state.tmp" "$state"
  exit 0
fi
next=$((iteration + 1))
jq --argjson n "$next" '.iteration = $n' "$state" >"$state.tmp" && mv "$state.tmp" "$state"
jq -n --arg r "$(jq -r '.prompt' "$state")" --arg m "loop $next/$max" '{decision: "block", reason: $r, systemMessage: $m}'
