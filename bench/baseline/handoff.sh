#!/usr/bin/env bash
# Baseline for `session-end-handoff`: the bash+jq+git way to leave a handoff record.
# Usage: handoff.sh STATE_DIR < hook.json
set -u
input=$(cat)
session=$(jq -r '.session_id' <<<"$input")
cwd=$(jq -r '.cwd' <<<"$input")
transcript=$(jq -r '.transcript_path // empty' <<<"$input")
head=$(git -C "$cwd" rev-parse HEAD 2>/dev/null)
branch=$(git -C "$cwd" rev-parse --abbrev-ref HEAD 2>/dev/null)
changed=$(git -C "$cwd" status --porcelain 2>/dev/null | head -n 50 | cut -c4- | jq -R . | jq -s .)
last=""
if [ -n "$transcript" ] && [ -f "$transcript" ]; then
  last=$(grep '"type":"assistant"' "$transcript" | grep '"type":"text"' | tail -n 1 \
    | jq -r '[.message.content[] | select(.type == "text") | .text] | join("\n")' | tail -c 2000 \
    | sed -e 's/<<<VIGIL_/<<<VIG-IL_/g' -e 's/<promise>/<pro-mise>/g' -e 's#</promise>#</pro-mise>#g')
fi
mkdir -p "$1/handoff"
jq -n --arg s "$session" --arg h "$head" --arg b "$branch" --argjson c "$changed" --arg m "$last" \
  '{schema: "vigil.handoff/v1", kind: "final", session_id: $s, git: {head: $h, branch: $b, dirty: ($c | length > 0), changed_files: $c}, last_message: $m}' \
  >"$1/handoff/final.json.tmp" && mv "$1/handoff/final.json.tmp" "$1/handoff/final.json"
