#!/usr/bin/env bash
# Baseline for `stop-gate loop run ... -- COMMAND`: write a pending loop with a fresh id, run
# COMMAND with the id in its environment, then read who claimed it and the loop's status, and
# exit with the verdict. Usage: loop-run.sh STATE_DIR COMMAND...
set -u
state=$1
shift
id=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
mkdir -p "$state/loops"
jq -n --arg id "$id" '{schema: "vigil.loop/v2", session_id: "pending", prompt: "Go on.",
  completion_promise: "DONE", max_iterations: 10, iteration: 1, status: "running"}' >"$state/loops/run-$id.json"
VIGIL_LOOP_RUN=$id "$@"
claim=$state/loops/run-$id.claimed
if [ ! -f "$claim" ]; then
  rm -f "$state/loops/run-$id.json"
  echo "loop-run: the loop never ran: no session claimed it" >&2
  exit 4
fi
session=$(jq -r .session_id "$claim")
status=$(jq -r .status "$state/loops/$session.json")
rm -f "$claim"
[ "$status" = passed ]
