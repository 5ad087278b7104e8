#!/usr/bin/env bash
# vigil's test command: `cargo test --locked` (arguments are passed on), then one closing line
# with the totals of every test binary, naming each test skipped for want of a tool (cargo
# test counts a skipped test as passed; it must not read as one). Exits as cargo test did.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --locked "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
awk '
  /^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
  /^vigil-test: SKIPPED / { line = $0; sub(/^vigil-test: SKIPPED /, "", line); skipped[++s] = line }
  END {
    if (s == 0) { printf "%d passed, %d failed\n", p, f; exit }
    printf "%d passed, %d failed, %d skipped for want of a tool (cargo test counted them as passed):\n", p - s, f, s
    for (i = 1; i <= s; i++) printf "  skipped %s\n", skipped[i]
  }' "$log"
exit "$status"
