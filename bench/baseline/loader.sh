#!/usr/bin/env bash
# Baseline for `session-start-loader`: the bash+jq way to turn handoff records into context.
# Usage: loader.sh STATE_DIR < hook.json
set -u
cat >/dev/null
text=""
for f in "$1/handoff/final.json" "$1/handoff/checkpoint.json"; do
  [ -f "$f" ] || continue
  text+=$(jq -r '"[\(.kind)] session \(.session_id)\n  git: branch \(.git.branch) at \(.git.head[0:12]), dirty: \(.git.changed_files | join(", "))\n  last message: \(.last_message)\n"' "$f")
done
[ -f PROGRESS.md ] && text+=$'\nProgress:\n'$(tail -c 4096 PROGRESS.md)
jq -n --arg c "$text" '{hookSpecificOutput: {hookEventName: "SessionStart", additionalContext: $c}}'
