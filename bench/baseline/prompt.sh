#!/usr/bin/env bash
# Baseline for `stop-gate` on UserPromptSubmit: read the prompt from the hook input, see
# whether it starts with a loop slash command, find none; then, with no loop record, look in
# the transcript's last 256 KiB for a block of a vigil loop (the witness of a vanished record),
# find none, let it through. Usage: prompt.sh STATE_DIR < hook.json
set -u
# shellcheck source=bench/baseline/witness.sh
. "$(dirname "$0")/witness.sh"
input=$(cat)
prompt=$(jq -r '.prompt // empty' <<<"$input")
case $prompt in
  /vigil-loop* | /vigil-cancel* | /vigil:vigil-loop* | /vigil:vigil-cancel*) echo '{}' ;;
esac
witness "${1:-/nonexistent}" "$input"
exit 0
