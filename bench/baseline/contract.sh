#!/usr/bin/env bash
# Baseline for `stop-gate --contract default` on SubagentStop: the bash+jq way to hold a
# subagent's report to fixed fields (jq, not a JSON Schema validator). Prints a block when the
# report is not one object of the shape. Usage: contract.sh < hook.json
set -u
input=$(cat)
report=$(jq -r '.last_assistant_message // empty' <<<"$input")
if jq -e 'type == "object"
  and (.status | IN("done", "partial", "blocked"))
  and (.answer | type == "string" and length > 0)
  and (.evidence | type == "array" and all(type == "string"))
  and (.changed | type == "array" and all(type == "string"))
  and (.open_questions | type == "array" and all(type == "string"))
  and (.tokens_used | type == "number" and . >= 0 and floor == .)
  and (keys - ["status","answer","evidence","changed","open_questions","tokens_used"] | length == 0)
  and (.status != "blocked" or (.open_questions | length > 0))' <<<"$report" >/dev/null 2>&1; then
  exit 0
fi
jq -n '{decision: "block", reason: "the subagent report breaks the contract"}'
