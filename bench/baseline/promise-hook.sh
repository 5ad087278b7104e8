#!/usr/bin/env bash
# Baseline for `promise-matcher --hook`: the bash+jq way today's Ralph-loop plugins match a
# completion promise in a Stop hook. Usage: promise-hook.sh PROMISE < hook.json
# Exit 0 when the first <promise>…</promise> pair holds PROMISE (weaker than vigil's rules:
# it cannot tell a declaration from a mention, which is the point of vigil).
set -u
input=$(cat)
message=$(jq -r '.last_assistant_message // empty' <<<"$input")
if [ -z "$message" ]; then
  transcript=$(jq -r '.transcript_path // empty' <<<"$input")
  [ -n "$transcript" ] && [ -f "$transcript" ] || exit 1
  last=$(grep '"type":"assistant"' "$transcript" | grep '"type":"text"' | grep -v '"isSidechain":true' | tail -n 1)
  message=$(jq -r '[.message.content[] | select(.type == "text") | .text] | join("\n")' <<<"$last")
fi
found=$(printf '%s' "$message" | perl -0777 -ne 'print $1 if /<promise>(.*?)<\/promise>/s' | tr -s '[:space:]' ' ' | sed 's/^ //; s/ $//')
[ "$found" = "$1" ]
