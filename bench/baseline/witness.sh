# shellcheck shell=bash
# Sourced by the Stop and UserPromptSubmit baselines: with no loop record for the session of
# the hook input INPUT, look in the transcript's last 256 KiB for a block of a vigil loop
# (the witness of a vanished record), and say NOT verified when one is there.
# Usage: witness STATE_DIR INPUT
witness() {
  local input=$2 session transcript
  session=$(jq -r '.session_id // empty' <<<"$input")
  [ -f "$1/loops/$session.json" ] && return 0
  transcript=$(jq -r '.transcript_path // empty' <<<"$input")
  [ -f "$transcript" ] || return 0
  if tail -c 262144 "$transcript" | grep -F hook_blocking_error | jq -e 'select(.type == "attachment" and .attachment.type == "hook_blocking_error" and .attachment.hookEvent == "Stop" and (.attachment.blockingError.blockingError | contains("vigil loop ")))' >/dev/null 2>&1; then
    echo '{"systemMessage":"vigil: the loop is NOT verified"}'
  fi
}
