#!/usr/bin/env bash
# Baseline for `stop-gate` with no loop record: look for the session's loop, find none, then
# look in the transcript's last 256 KiB for a block of a vigil loop (the witness of a vanished
# record), find none, allow. Usage: stop-witness.sh STATE_DIR < hook.json
set -u
# shellcheck source=bench/baseline/witness.sh
. "$(dirname "$0")/witness.sh"
input=$(cat)
witness "$1" "$input"
exit 0
