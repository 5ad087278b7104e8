#!/usr/bin/env bash
# Two builds of vigil compared by the instructions each hook executes (valgrind's Ir count):
# the CPU work of a change, free of the machine's noise, which on a small VM moves a 1 ms row
# by 30% between runs of bench/run.sh. Prints a table: before, after, and their ratio.
#
#   bench/compare.sh BEFORE_DIR AFTER_DIR   # directories holding the six binaries
#
# A build of a commit: `git worktree add /tmp/before REV && /tmp/before/scripts/release-build.sh`
# prints its directory. Each row runs a binary once per build, with the same input.
# Needs valgrind and jq.
set -euo pipefail

[ $# -eq 2 ] || { echo "usage: bench/compare.sh BEFORE_DIR AFTER_DIR" >&2; exit 2; }
for tool in valgrind jq git; do
  command -v "$tool" >/dev/null 2>&1 || { echo "compare: $tool is needed; install it first" >&2; exit 2; }
done
declare -A dir
dir[before]=$(cd "$1" && pwd)
dir[after]=$(cd "$2" && pwd)
samples=$(cd "$(dirname "$0")/.." && pwd)/tests/fixtures/samples
work=$(mktemp -d "${TMPDIR:-/tmp}/vigil-compare.XXXXXX")
trap 'rm -rf "$work"' EXIT

# shellcheck disable=SC2016 # the backticks are Markdown, not a command
{ yes 'Fixed it.

```rust
fn main() {}
```

- item one, `two`
  > quoted *text* [link](http://x)

<!-- note -->' || true; } | head -c 1048576 >"$work/message"
printf '\n<promise>DONE</promise>\n' >>"$work/message"
jq -c --rawfile m "$work/message" '.last_assistant_message = $m' "$samples/claude-stop.json" >"$work/big.json"
# Each build its own project, state home and payloads: what one run writes (a handoff record,
# a loop's pass) the other build's run does not meet.
for side in before after; do
  at=$work/$side
  mkdir -p "$at/project"
  git init -q "$at/project"
  jq -c --arg cwd "$at/project" '.cwd = $cwd | .session_id = "idle" | .last_assistant_message = "Working on it."' \
    "$samples/claude-stop.json" >"$at/idle.json"
  jq -c '.session_id = "looping"' "$at/idle.json" >"$at/looping.json"
  jq -cn --arg cwd "$at/project" '{session_id: "idle", hook_event_name: "PreToolUse", cwd: $cwd,
    tool_name: "Write", tool_input: {file_path: "src/parser.rs", content: "fn parse() {}\n"}}' >"$at/pretool.json"
  jq -c '.source = "startup" | .hook_event_name = "SessionStart"' "$at/idle.json" >"$at/start.json"
  jq -c '.reason = "exit" | .hook_event_name = "SessionEnd"' "$at/idle.json" >"$at/end.json"
  (cd "$at/project" && VIGIL_STATE_HOME=$at/state "${dir[$side]}/stop-gate" loop start --session looping \
    --max-iterations 10000 --completion-promise DONE "Fix it." >/dev/null)
done

# instructions SIDE BINARY INPUT [ARGS...]: the instructions one run executes (with those of a
# child it forks, as the handoff's remover of replaced files).
instructions() {
  local side=$1 binary=$2 input=$3
  shift 3
  case $input in /*) ;; *) input=$work/$side/$input ;; esac
  VIGIL_STATE_HOME=$work/$side/state valgrind --tool=callgrind --callgrind-out-file=/dev/null \
    "${dir[$side]}/$binary" "$@" <"$input" 2>&1 >/dev/null | sed -n 's/.*Collected : //p' | awk '{ sum += $1 } END { print sum }'
}

printf '| row | before (instructions) | after | after ÷ before |\n|---|---:|---:|---:|\n'
row() { # LABEL BINARY INPUT [ARGS...]
  local label=$1 b a
  shift
  b=$(instructions before "$@")
  a=$(instructions after "$@")
  printf '| %s | %s | %s | %s |\n' "$label" "$b" "$a" "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", a / b }')"
}
row "promise-matcher --hook, Stop payload" promise-matcher "$samples/claude-stop.json" --hook
row "promise-matcher --hook, a 1 MB Markdown message" promise-matcher "$work/big.json" --hook
row "stop-gate, Stop, no loop" stop-gate idle.json
row "stop-gate, Stop, loop running, not declared" stop-gate looping.json
row "stop-gate, PreToolUse, Write into the project" stop-gate pretool.json
row "session-start-loader, startup" session-start-loader start.json
row "session-end-handoff, SessionEnd" session-end-handoff end.json
