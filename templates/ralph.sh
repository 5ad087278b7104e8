#!/usr/bin/env bash
# ralph.sh: run PROMPT.md through `claude -p` until the agent declares DONE, at most
# RALPH_MAX passes (default 20). Each pass's output is kept in ralph-N.log.
# Exit 0 declared, 1 never declared (NOT verified), 3 the agent asks a human to decide.
set -u
max=${RALPH_MAX:-20}
prompt=${RALPH_PROMPT:-PROMPT.md}
[ -f "$prompt" ] || { echo "ralph: $prompt not found; write the task there first" >&2; exit 2; }
for ((i = 1; i <= max; i++)); do
  verdict=$(claude -p "$(cat "$prompt")" | tee "ralph-$i.log" | promise-matcher --promise DONE)
  case $verdict in
    declared) echo "declared DONE on pass $i"; exit 0 ;;
    blocked)  echo "pass $i asks a human to decide: see ralph-$i.log" >&2; exit 3 ;;
    *)        echo "pass $i: ${verdict:-error}" ;;   # mentioned or absent: go again
  esac
done
echo "no declaration after $max passes: the work is NOT verified" >&2
exit 1
