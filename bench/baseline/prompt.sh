#!/usr/bin/env bash
# Baseline for `stop-gate` on UserPromptSubmit: read the prompt from the hook input, see
# whether it starts with a loop slash command, find none, let it through.
# Usage: prompt.sh < hook.json
set -u
prompt=$(jq -r '.prompt // empty' <(cat))
case $prompt in
  /vigil-loop* | /vigil-cancel* | /vigil:vigil-loop* | /vigil:vigil-cancel*) echo '{}' ;;
  *) exit 0 ;;
esac
