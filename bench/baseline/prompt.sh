#!/usr/bin/env bash
# Baseline for `stop-gate` on UserPromptSubmit: read the prompt from the hook input, see
# whether it starts with a loop slash command, find none; then, with no loop record, look in
# the transcript's last 256 KiB for a block of a vigil loop (the witness of a vanished record),
# find none, let it through. Usage: prompt.sh STATE_DIR < hook.json
set -u
input=$(cat)
prompt=$(jq -r '.prompt // empty' <<<"$input")
case $prompt in
  /vigil-loop* | /vigil-cancel* | /vigil:vigil-loop* | /vigil:vigil-cancel*) echo '{}' ;;
esac
session=$(jq -r '.session_id // empty' <<<"$input")
[ -f "${1:-/nonexistent}/loops/$session.json" ] && exit 0
transcript=$(jq -r '.transcript_path // empty' <<<"$input")
[ -f "$transcript" ] || exit 0
if tail -c 262144 "$transcript" | grep -F hook_blocking_error | jq -e 'select(.type == "attachment" and .attachment.type == "hook_blocking_error" and .attachment.hookEvent == "Stop" and (.attachment.blockingError.blockingError | contains("vigil loop ")))' >/dev/null 2>&1; then
  echo '{"systemMessage":"vigil: the loop is NOT verified"}'
fi
exit 0
