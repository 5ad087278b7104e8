#!/usr/bin/env bash
# vigil's benchmark: each binary on realistic input, beside /bin/true and beside a bash+jq
# implementation of the same job (bench/baseline/), printed as a table of medians and ratios.
#
#   bench/run.sh                      # every row, transcripts of 1 MB, 100 MB and 1 GB
#   BENCH_SIZES="1 100" bench/run.sh  # smaller scaling rows (sizes in MB)
#   BENCH_RUNS=50 bench/run.sh        # more runs per row (default 30)
#   BENCH_HELD_FILES="1,000 100,000" bench/run.sh  # the held Stop's projects (100,000 with 1024)
#
# Uses hyperfine when it is installed, else a loop timed with `date +%s%N`. Installs nothing:
# it needs cargo, jq and perl, and says so when one is missing.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
runs=${BENCH_RUNS:-30}
sizes=${BENCH_SIZES:-"1 100 1024"}

for tool in cargo jq perl; do
  command -v "$tool" >/dev/null 2>&1 || { echo "bench: $tool is needed; install it first" >&2; exit 2; }
done
if command -v hyperfine >/dev/null 2>&1; then timer=hyperfine; else timer=loop; fi

work=$(mktemp -d "${TMPDIR:-/tmp}/vigil-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
# The protected state of every row, in its own state home (on the same disk as the work).
export VIGIL_STATE_HOME=$work/state

# The binaries as install.sh builds them (static on Linux), or those in $VIGIL_BUILT_DIR.
built=${VIGIL_BUILT_DIR:-$("$root/scripts/release-build.sh")}
pm=$built/promise-matcher
sg=$built/stop-gate
mw=$built/marker-writer
se=$built/session-end-handoff
sl=$built/session-start-loader
samples=$root/tests/fixtures/samples

# median_ms CMD [PREPARE]: the median wall time of CMD in milliseconds, three decimals;
# PREPARE, when given, runs before each run and is not timed.
median_ms() {
  local prepare=${2:-true}
  if [ "$timer" = hyperfine ]; then
    hyperfine --style none --ignore-failure --warmup 3 --runs "$runs" --prepare "$prepare" --export-json "$work/h.json" "$1" >/dev/null 2>&1
    jq -r '.results[0].median * 1000 | . * 1000 | round / 1000' "$work/h.json"
  else
    local times=() i start end
    for ((i = 0; i < 3; i++)); do eval "$prepare" >/dev/null 2>&1; eval "$1" >/dev/null 2>&1 || true; done
    for ((i = 0; i < runs; i++)); do
      eval "$prepare" >/dev/null 2>&1 || true
      start=$(date +%s%N)
      eval "$1" >/dev/null 2>&1 || true
      end=$(date +%s%N)
      times+=($((end - start)))
    done
    printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.3f\n", a[int((NR+1)/2)]/1e6}'
  fi
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'; }

# transcript FILE MB: a Claude Code transcript of about MB megabytes whose last main-chain
# assistant text declares DONE, followed by a tool_use-only line, as a real one ends.
transcript() {
  local file=$1 mb=$2 block count
  block=$(printf '%s\n' \
    '{"type":"user","isSidechain":false,"message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"'"$(head -c 1800 /dev/zero | tr '\0' 'x')"'"}]}}' \
    '{"type":"assistant","isSidechain":false,"message":{"role":"assistant","content":[{"type":"thinking","thinking":"Next step."}]}}' \
    '{"type":"assistant","isSidechain":false,"message":{"role":"assistant","content":[{"type":"text","text":"Running the tests again."}]}}' \
    '{"type":"assistant","isSidechain":false,"message":{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"cargo test"}}]}}')
  count=$(( mb * 1024 * 1024 / (${#block} + 1) ))
  { yes "$block" || true; } | head -n "$((count * 4))" >"$file"
  printf '%s\n' \
    '{"type":"assistant","isSidechain":false,"message":{"role":"assistant","content":[{"type":"text","text":"All tests pass.\n\n<promise>DONE</promise>"}]}}' \
    '{"type":"assistant","isSidechain":false,"message":{"role":"assistant","content":[{"type":"tool_use","id":"t2","name":"TodoWrite","input":{"todos":[]}}]}}' >>"$file"
}

# terminal_log FILE MB: TUI output (colours, gutters, spinner frames) ending with the marker.
terminal_log() {
  local file=$1 mb=$2 line count
  line=$'\e[2m\u2502\e[0m \e[36mworking\e[0m on step \e[1m42\e[0m of the plan, reading src/parse.rs \u2502\r'
  count=$(( mb * 1024 * 1024 / (${#line} + 1) ))
  { yes "$line" || true; } | head -n "$count" >"$file"
  printf '\e[9;1H<<<VIGIL_DONE_%s>>>\r\n' "$token" >>"$file"
}

token=9f3c2a7e5b1d4c6a8e0f2b4d6c8a0e1f
marker="<<<VIGIL_DONE_$token>>>"
cp "$samples/claude-stop.json" "$work/stop.json"

true_ms=$(median_ms /bin/true)
printf '| job | input | vigil (ms) | bash+jq (ms) | vigil ÷ /bin/true | bash+jq ÷ vigil |\n'
printf '|---|---|---:|---:|---:|---:|\n'
printf "| start a process | \`/bin/true\` | %s | | 1.00x | |\n" "$true_ms"

row() { # job input vigil-cmd baseline-cmd
  local v b
  v=$(median_ms "$3")
  b=$(median_ms "$4")
  printf '| %s | %s | %s | %s | %s | %s |\n' "$1" "$2" "$v" "$b" "$(ratio "$v" "$true_ms")" "$(ratio "$b" "$v")"
}

row "promise-matcher --hook" "Stop payload (last_assistant_message)" \
  "$pm --hook <$work/stop.json" "bash $here/baseline/promise-hook.sh DONE <$work/stop.json"

# A 1 MB message read as CommonMark: realistic Markdown (fences, lists, quotes, HTML, links),
# then 1 MB and 4 MB of `[`, the costliest shape found for the parser (it stays linear).
message_row() { # LABEL UNIT MB
  { yes "$2" || true; } | head -c "$(($3 * 1048576))" >"$work/message"
  printf '\n<promise>DONE</promise>\n' >>"$work/message"
  jq -c --rawfile m "$work/message" '.last_assistant_message = $m' "$samples/claude-stop.json" >"$work/big-stop.json"
  "$pm" --hook <"$work/big-stop.json" >/dev/null || { echo "bench: the $1 message did not declare" >&2; exit 1; }
  row "promise-matcher --hook" "$1" \
    "$pm --hook <$work/big-stop.json" "bash $here/baseline/promise-hook.sh DONE <$work/big-stop.json"
}
# shellcheck disable=SC2016 # the backticks are Markdown, not a command
message_row "a 1 MB Markdown message" 'Fixed it.

```rust
fn main() {}
```

- item one, `two`
  > quoted *text* [link](http://x)

<!-- note -->' 1
message_row "1 MB of \`[\`" '[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[' 1
message_row "4 MB of \`[\`" '[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[' 4

# stop-gate: a project with a loop running in session "looping" and none in "idle".
mkdir -p "$work/project"
jq -c --arg cwd "$work/project" '.cwd = $cwd | .session_id = "idle" | .last_assistant_message = "Working on it."' \
  "$samples/claude-stop.json" >"$work/idle.json"
jq -c '.session_id = "looping"' "$work/idle.json" >"$work/looping.json"
(cd "$work/project" && "$sg" loop start --session looping --max-iterations 10000 --completion-promise DONE \
  "Fix the parser and keep the tests green." >/dev/null)
(cd "$work/project" && "$sg" loop status --session looping --json) >"$work/baseline-state.json"
mkdir -p "$work/baseline-state/loops"
row "stop-gate" "Stop, no loop, no checks" \
  "$sg <$work/idle.json" "bash $here/baseline/stop-noop.sh $work/baseline-state <$work/idle.json"
# A session with no record and a real transcript: the witness of a vanished loop reads the
# transcript's last 256 KiB for vigil's blocks (issue 29).
transcript "$work/idle-transcript.jsonl" 10
jq -c --arg t "$work/idle-transcript.jsonl" '.transcript_path = $t' "$work/idle.json" >"$work/idle-witness.json"
row "stop-gate" "Stop, no loop, 10 MB transcript (the witness reads its last 256 KiB)" \
  "$sg <$work/idle-witness.json" "bash $here/baseline/stop-witness.sh $work/baseline-state <$work/idle-witness.json"
row "stop-gate" "Stop, loop running, not declared (one fdatasync)" \
  "$sg <$work/looping.json" "bash $here/baseline/stop-loop.sh $work/baseline-state.json <$work/looping.json"
# A Stop that ends a loop (declared) and writes its wake for the commander (issue 32): each run
# on a loop started afresh (not timed).
jq -c '.session_id = "ending" | .last_assistant_message = "Done.\n<promise>DONE</promise>"' \
  "$work/idle.json" >"$work/ending.json"
ending_start="cd $work/project && $sg loop start --session ending --name ending --max-iterations 10 --completion-promise DONE 'Finish it.'"
v=$(median_ms "$sg <$work/ending.json" "$ending_start")
b=$(median_ms "bash $here/baseline/stop-wake.sh $work/ending-state.json $work/wakes <$work/ending.json" \
  "cp $work/baseline-state.json $work/ending-state.json")
printf '| %s | %s | %s | %s | %s | %s |\n' "stop-gate" "Stop that ends a loop and writes its wake (two fsyncs more)" "$v" "$b" "$(ratio "$v" "$true_ms")" "$(ratio "$b" "$v")"
# UserPromptSubmit runs on every prompt the human sends: most are not vigil commands.
# With no loop record, the witness of a vanished loop reads the transcript's last 256 KiB.
jq -c --arg cwd "$work/project" --arg t "$work/idle-transcript.jsonl" '.cwd = $cwd | .session_id = "idle" | .transcript_path = $t | .prompt = "Fix the parser, then run the tests and tell me what failed."' \
  "$samples/claude-user-prompt-submit-slash.json" >"$work/prompt.json"
row "stop-gate" "UserPromptSubmit, no slash command, 10 MB transcript (the witness reads its last 256 KiB)" \
  "$sg <$work/prompt.json" "bash $here/baseline/prompt.sh $work/baseline-state <$work/prompt.json"
# loop run's own work around a command: the pending loop, the run, the verdict (here `true`
# starts no session, so it ends 4, "never ran", as the baseline does).
row "stop-gate loop run" "around \`true\` (pending loop written, command run, claim read)" \
  "cd $work/project && $sg loop run --max-iterations 10 --completion-promise DONE -- true" \
  "bash $here/baseline/loop-run.sh $work/baseline-state true"

# The subagent contract: a valid report of the default shape, compiled and validated with the
# jsonschema crate on each SubagentStop, beside jq checking the same fields.
jq -c --arg cwd "$work/project" '.cwd = $cwd | .session_id = "idle" | .last_assistant_message = "{\"status\":\"done\",\"answer\":\"There is one file.\",\"evidence\":[\"ls: 1 entry\"],\"changed\":[],\"open_questions\":[],\"tokens_used\":1200}"' \
  "$samples/claude-subagent-stop-real.json" >"$work/subagent.json"
[ -z "$("$sg" --contract default <"$work/subagent.json")" ] || { echo "bench: the report broke the contract" >&2; exit 1; }
row "stop-gate --contract default" "SubagentStop, a valid report" \
  "$sg --contract default <$work/subagent.json" "bash $here/baseline/contract.sh <$work/subagent.json"

# The file tools' guard (--protect): PreToolUse on every Edit and Write, here a Write into the
# project, which it allows.
jq -cn --arg cwd "$work/project" '{session_id: "idle", hook_event_name: "PreToolUse", cwd: $cwd,
  tool_name: "Write", tool_input: {file_path: "src/parser.rs", content: "fn parse() {}\n"}}' >"$work/pretool.json"
[ -z "$("$sg" <"$work/pretool.json")" ] || { echo "bench: the guard denied a write into the project" >&2; exit 1; }
row "stop-gate" "PreToolUse, Write into the project (allowed)" \
  "$sg <$work/pretool.json" "bash $here/baseline/pretool.sh $work/project <$work/pretool.json"

# A confined check (bubblewrap), against the same check run unconfined, which the gate does
# only where bubblewrap is missing: as root, a mount namespace hides it for that row.
check_row() { # LABEL
  local confined unconfined bwrap
  confined=$(median_ms "$sg --run true <$work/idle.json")
  unconfined=-
  bwrap=$(command -v bwrap || true)
  if [ -n "$bwrap" ] && [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
    unconfined=$(unshare -m bash -c "mount --bind /dev/null '$bwrap' && $(declare -f median_ms); timer=$timer; runs=$runs; work=$work; median_ms '$sg --run true <$work/idle.json'")
  fi
  printf "| stop-gate --run true | %s | %s | %s (unconfined) | %s | %s |\n" "$1" "$confined" "$unconfined" \
    "$(ratio "$confined" "$true_ms")" "$(awk -v a="$confined" -v b="$unconfined" 'BEGIN { if (b + 0 > 0) printf "+%.1f ms", a - b; else print "-" }')"
}
check_row "Stop, a \`true\` check, confined (bubblewrap); last column: what confinement adds"

# The human's hold (issue 41): a declared Stop whose check runs confined in the warm copy of
# the project (kept in the protected state and brought to the tree by what changed: the held
# tests as held and read-only), beside the same Stop and check in a project alike with nothing
# held (confined in the project), and beside the held Stop in a copy made afresh
# (VIGIL_CHECK_COPY=fresh: every file copied and hashed). Before each run the agent edits 5
# files and a loop is started afresh (not timed); each Stop ends it by declaring, so each also
# records the tree it vouched for: under the hold the copy's id, else a hash of the tree. The
# last column is what the hold adds. 100,000 files come with the largest size set, in at most
# 5 runs a row; BENCH_HELD_FILES="1,000 100,000" chooses.
held_files=${BENCH_HELD_FILES:-}
if [ -z "$held_files" ]; then
  case " $sizes " in
    *" 1024 "*) held_files="1,000 100,000" ;;
    *) held_files="1,000" ;;
  esac
fi
# medians_ms PREPARE CMD [PREPARE CMD]...: each CMD's median as median_ms times it, on one line.
# The loop timer alternates their runs, so that a machine or a file system that drifts during
# the row weighs on each alike (a held Stop makes and removes a copy of the project on each
# run); hyperfine times them one after the other.
medians_ms() {
  local -a args=("$@") times=() out=()
  local n=$(($# / 2)) i j start end
  if [ "$timer" = hyperfine ]; then
    for ((j = 0; j < n; j++)); do out+=("$(median_ms "${args[2 * j + 1]}" "${args[2 * j]}")"); done
    echo "${out[*]}"
    return
  fi
  for ((i = 0; i < runs + 3; i++)); do
    for ((j = 0; j < n; j++)); do
      eval "${args[2 * j]}" >/dev/null 2>&1 || true
      start=$(date +%s%N)
      eval "${args[2 * j + 1]}" >/dev/null 2>&1 || true
      end=$(date +%s%N)
      if ((i >= 3)); then times[j]+="$((end - start)) "; fi
    done
  done
  for ((j = 0; j < n; j++)); do
    out+=("$(tr ' ' '\n' <<<"${times[j]}" | grep . | sort -n | awk '{a[NR]=$1} END {printf "%.3f\n", a[int((NR+1)/2)]/1e6}')")
  done
  echo "${out[*]}"
}
# held_project DIR FILES TESTS [REPORT]: a git project of FILES source files, 100 to a
# directory, tests/ of TESTS Python test files, and REPORT as report.xml; its declared Stop in
# DIR.stop.json.
held_project() {
  mkdir -p "$1/tests"
  (cd "$1" && perl -e '
    my ($files, $tests) = @ARGV;
    for my $d (1 .. int(($files + 99) / 100)) {
      mkdir "src$d" or die "src$d: $!";
      for my $f (1 .. 100) {
        last if ($d - 1) * 100 + $f > $files;
        open my $fh, ">", "src$d/m$f.py" or die "src$d/m$f.py: $!";
        print $fh "def f$f():\n    return $d * $f\n";
        close $fh;
      }
    }
    for my $t (1 .. $tests) {
      open my $fh, ">", sprintf("tests/test_m%02d.py", $t) or die "tests: $!";
      printf $fh "import unittest\n\n\nclass Test%02d(unittest.TestCase):\n    def test_value(self):\n        self.assertEqual(%d + 1, %d)\n", $t, $t, $t + 1;
      close $fh;
    }' "$2" "$3")
  printf '__pycache__/\n' >"$1/.gitignore"
  [ -z "${4:-}" ] || cp "$4" "$1/report.xml"
  git -C "$1" init -q
  git -C "$1" add -A
  # No `gc --auto` left running in the background (it packs 100,000 loose objects).
  git -C "$1" -c gc.auto=0 -c user.name=bench -c user.email=bench@example.invalid commit -qm files
  jq -c --arg cwd "$1" '.cwd = $cwd | .session_id = "held" | .last_assistant_message = "Done.\n\n<promise>DONE</promise>"' \
    "$samples/claude-stop.json" >"$1.stop.json"
}
held_start="$sg loop start --session held --max-iterations 10 --completion-promise DONE 'Finish it.'"
held_pass() { # DIR CHECK: one declared Stop with `--run CHECK`, which must pass
  (cd "$1" && eval "$held_start" >/dev/null)
  "$sg" --run "$2" <"$1.stop.json" >/dev/null || true
  [ "$(cd "$1" && "$sg" loop status --session held --json | jq -r .status)" = passed ] ||
    { echo "bench: in $1, a declared Stop with the check \`$2\` did not pass" >&2; exit 1; }
}
held_row() { # JOB INPUT MS OTHER-MS OTHER-NAME: the last column is MS - OTHER-MS
  printf '| %s | %s | %s | %s (%s) | %s | %s |\n' "$1" "$2" "$3" "$4" "$5" "$(ratio "$3" "$true_ms")" \
    "$(awk -v a="$3" -v b="$4" 'BEGIN { if (b + 0 > 0) printf "%+.1f ms", a - b; else print "-" }')"
}
for label in $held_files; do
  n=${label//,/}
  held_runs=$runs
  if [ "$n" -ge 100000 ] && [ "$runs" -gt 5 ]; then held_runs=5; fi
  # Two projects alike: one held, one not, their Stops alternated.
  free=$work/free$n
  held=$work/held$n
  held_project "$free" "$n" 50
  held_project "$held" "$n" 50
  (cd "$held" && "$sg" hold add tests >/dev/null)
  held_pass "$free" true
  held_pass "$held" true
  # (its own loop variable: the timer's `i` is the one that counts runs)
  edits() { echo "for edit in 1 2 3 4 5; do echo \"# \$\$\" >>$1/src\$edit/m1.py; done"; }
  read -r free_ms held_ms fresh_ms < <(runs=$held_runs medians_ms \
    "cd $free && $held_start && $(edits "$free")" "$sg --run true <$free.stop.json" \
    "cd $held && $held_start && $(edits "$held")" "$sg --run true <$held.stop.json" \
    "cd $held && $held_start && $(edits "$held")" "VIGIL_CHECK_COPY=fresh $sg --run true <$held.stop.json")
  held_row "stop-gate --run true, tests held" \
    "declared Stop after 5 files edited, $label files and tests/ (50 files) held, the check in the warm copy ($held_runs runs); last column: what the hold adds" \
    "$held_ms" "$free_ms" "nothing held"
  held_row "stop-gate --run true, tests held, a fresh copy" \
    "the same Stop with VIGIL_CHECK_COPY=fresh (every file copied); last column: what the warm copy saves" \
    "$fresh_ms" "$held_ms" "the warm copy"
  rm -rf "$free" "$held"
done

# A JUnit report of 10,000 tests read test by test (quick-xml): a held Stop whose check copies
# the report to {junit}, beside the same copy to /dev/null (no report to read), in a project of
# three files (the report, .gitignore and the one test held: the copy costs little); and the
# same in a second such project whose hold has a baseline of those 10,000 tests (`hold
# baseline`), each of which must pass by name.
perl -e '
  print qq{<?xml version="1.0" encoding="utf-8"?>\n<testsuites name="pytest tests">\n};
  print qq{<testsuite name="pytest" errors="0" failures="0" skipped="0" tests="10000" time="41.250" timestamp="2026-01-01T00:00:00.000000+00:00" hostname="bench">\n};
  for my $i (1 .. 10000) {
    my $m = int(($i - 1) / 100) + 1;
    printf qq{<testcase classname="tests.test_parser%03d.TestParse" name="test_case_%05d" file="tests/test_parser%03d.py" line="%d" time="0.004" />\n}, $m, $i, $m, 10 * (($i - 1) % 100) + 3;
  }
  print "</testsuite>\n</testsuites>\n";' >"$work/report.xml"
report_kib=$(( $(wc -c <"$work/report.xml") / 1024 ))
for dir in "$work/junit" "$work/judged"; do
  held_project "$dir" 0 1 "$work/report.xml"
  (cd "$dir" && "$sg" hold add tests >/dev/null)
done
(cd "$work/judged" && "$sg" hold baseline "cp report.xml {junit}" >/dev/null)
[ "$(cd "$work/judged" && "$sg" hold show --json | jq '.tests.passed | length')" = 10000 ] ||
  { echo "bench: the baseline did not record the report's 10,000 tests as passed" >&2; exit 1; }
held_pass "$work/junit" "cp report.xml /dev/null"
held_pass "$work/junit" "cp report.xml {junit}"
held_pass "$work/judged" "cp report.xml {junit}"
read -r unread_ms read_ms judged_ms < <(medians_ms \
  "cd $work/junit && $held_start" "$sg --run 'cp report.xml /dev/null' <$work/junit.stop.json" \
  "cd $work/junit && $held_start" "$sg --run 'cp report.xml {junit}' <$work/junit.stop.json" \
  "cd $work/judged && $held_start" "$sg --run 'cp report.xml {junit}' <$work/judged.stop.json")
held_row "stop-gate --run 'cp REPORT {junit}', tests held" \
  "declared Stop, a JUnit report of 10,000 tests ($report_kib KiB) read, no baseline; last column: what reading it adds" \
  "$read_ms" "$unread_ms" "\`cp REPORT /dev/null\`"
held_row "stop-gate --run 'cp REPORT {junit}', tests held" \
  "declared Stop, the same report judged against a baseline of its 10,000 tests (each must pass by name); last column: what reading and judging it adds" \
  "$judged_ms" "$unread_ms" "\`cp REPORT /dev/null\`"
rm -rf "$work/junit" "$work/judged" "$work/report.xml"

# --max-tokens: a loop whose transcript has grown to 100 MB of usage records. After the
# first Stop, each reads only what was appended since (here nothing); the baseline reads the
# whole transcript each time.
(cd "$work/project" && "$sg" loop start --session counting --max-iterations 10000 --completion-promise DONE \
  --stall-after 0 --max-tokens 1000000000000 "Fix the parser and keep the tests green." >/dev/null)
usage_block=$(printf '%s\n' \
  '{"type":"user","isSidechain":false,"message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"'"$(head -c 1800 /dev/zero | tr '\0' 'x')"'"}]}}' \
  '{"type":"assistant","isSidechain":false,"timestamp":"2099-01-01T00:00:00.000Z","message":{"id":"msg_1","role":"assistant","content":[{"type":"text","text":"Running the tests again."}],"usage":{"input_tokens":111,"cache_creation_input_tokens":333,"cache_read_input_tokens":4444,"output_tokens":22}}}')
{ yes "$usage_block" || true; } | head -n "$(( 100 * 1024 * 1024 * 2 / (${#usage_block} + 1) ))" \
  | awk '/"msg_1"/ { sub(/"msg_1"/, "\"msg_" NR "\"") } { print }' >"$work/usage.jsonl"
jq -c --arg t "$work/usage.jsonl" '.session_id = "counting" | .transcript_path = $t' "$work/idle.json" >"$work/counting.json"
"$sg" <"$work/counting.json" >/dev/null
row "stop-gate --max-tokens" "Stop, loop running, 100 MB transcript (read from its offset)" \
  "$sg <$work/counting.json" "bash $here/baseline/tokens.sh 1000000000000 <$work/counting.json"
rm -f "$work/usage.jsonl"

for mb in $sizes; do
  transcript "$work/t$mb.jsonl" "$mb"
  jq -c --arg t "$work/t$mb.jsonl" '.transcript_path = $t' "$samples/claude-stop-old-version.json" >"$work/old$mb.json"
  "$pm" --hook <"$work/old$mb.json" >/dev/null || { echo "bench: the $mb MB transcript did not declare" >&2; exit 1; }
  row "promise-matcher --hook" "transcript fallback, $mb MB" \
    "$pm --hook <$work/old$mb.json" "bash $here/baseline/promise-hook.sh DONE <$work/old$mb.json"
  rm -f "$work/t$mb.jsonl"
done

for mb in $sizes; do
  terminal_log "$work/log$mb" "$mb"
  "$pm" scan --token "$token" "$work/log$mb" || { echo "bench: the $mb MB log did not scan as found" >&2; exit 1; }
  row "promise-matcher scan" "terminal log, $mb MB (64 KiB tail)" \
    "$pm scan --token $token $work/log$mb" "bash $here/baseline/scan.sh '$marker' $work/log$mb"
  # Not found, the common case while a task runs: the token is never printed, so the text and
  # flattened views run and the screen replay is skipped (it could not show the marker).
  other=0000000000000000ffffffffffffffff
  row "promise-matcher scan" "terminal log, $mb MB, not found (the token never printed: no replay)" \
    "$pm scan --token $other $work/log$mb" "bash $here/baseline/scan.sh '<<<VIGIL_DONE_$other>>>' $work/log$mb"
  # Not found, with every character of the marker printed somewhere: the screen is replayed.
  { yes $'\e[2m\u2502\e[0m \e[36mworking\e[0m on step \e[1m42\e[0m <VIGIL_DONE> 0123456789abcdef \u2502\r' || true; } \
    | head -c "$((mb * 1048576))" >"$work/chars$mb"
  row "promise-matcher scan" "terminal log, $mb MB, not found (every marker character printed: all 3 views)" \
    "$pm scan --token $other $work/chars$mb" "bash $here/baseline/scan.sh '<<<VIGIL_DONE_$other>>>' $work/chars$mb"
  rm -f "$work/log$mb" "$work/chars$mb"
done

# The worktree subject (marker-writer verify, and stop-gate --require-marker, which computes
# the same) beside git's own hash-everything, `git add -A && git write-tree` into an empty
# index, and beside `git status --porcelain` (which trusts the index's stat cache and reads no
# file): repositories of 10 and 1,000 files here, 10,000 and 100,000 below.
verify_row() { # DIR LABEL
  local v bytes
  (cd "$1" && "$mw" run --check tests -- true >/dev/null 2>&1)
  jq -c --arg cwd "$1" '.cwd = $cwd | .session_id = "bench" | .last_assistant_message = "Done."' \
    "$samples/claude-stop.json" >"$work/verify-stop.json"
  local everything="rm -f $work/empty-index && GIT_INDEX_FILE=$work/empty-index git -C $1 add -A && GIT_INDEX_FILE=$work/empty-index git -C $1 write-tree"
  row "marker-writer verify" "worktree of $2 files (baseline: git add -A && write-tree, empty index)" \
    "cd $1 && $mw verify --check tests" "$everything"
  row "marker-writer verify" "worktree of $2 files (baseline: git status --porcelain)" \
    "cd $1 && $mw verify --check tests" "git -C $1 status --porcelain"
  row "stop-gate --require-marker" "worktree of $2 files (baseline: git add -A && write-tree, empty index)" \
    "$sg --require-marker tests <$work/verify-stop.json" "$everything"
  v=$(median_ms "cd $1 && $mw verify --check tests")
  bytes=$(cd "$1" && git ls-files -z | xargs -0 cat -- | wc -c)
  hashed+=("$2 files: $bytes bytes hashed in $v ms, $(awk -v b="$bytes" -v ms="$v" 'BEGIN { printf "%.0f", b / 1048576 / (ms / 1000) }') MB/s")
}
hashed=()
for n in 10 1,000; do
  label=$n
  n=${n//,/}
  small=$work/repo$n
  mkdir -p "$small"
  for f in $(seq 1 "$n"); do printf 'file %s\n' "$f" >"$small/f$f.txt"; done
  git -C "$small" init -q
  git -C "$small" add -A
  git -C "$small" -c user.name=bench -c user.email=bench@example.invalid commit -qm files
  verify_row "$small" "$label"
done

# Markers that travel: the 1,000-file repository's verdict, signed by a "CI" clone, published
# as a git note and pushed; a "laptop" clone syncs it, then its Stop verifies it from the notes
# (no git runs). The baseline fetches the notes into the clone and reads them with git and jq.
notes_remote=$work/notes-remote.git
git init -q --bare -b master "$notes_remote"
git -C "$work/repo1000" push -q "$notes_remote" HEAD:master
git clone -q "$notes_remote" "$work/ci"
git clone -q "$notes_remote" "$work/laptop"
"$mw" keygen --out "$work/keys" >/dev/null
(cd "$work/ci" && "$mw" write --check tests --status passed --publish --sign-key "$work/keys/vigil-marker.key" >/dev/null && "$mw" sync --push --remote "$notes_remote" >/dev/null)
(cd "$work/laptop" && "$mw" sync >/dev/null && git fetch -q origin 'refs/notes/*:refs/notes/*')
jq -c --arg cwd "$work/laptop" '.cwd = $cwd | .session_id = "bench" | .last_assistant_message = "Done."' \
  "$samples/claude-stop.json" >"$work/laptop-stop.json"
[ -z "$(cd "$work/laptop" && "$sg" --require-marker tests --verify-key "$work/keys/vigil-marker.pub" <"$work/laptop-stop.json")" ] ||
  { echo "bench: the laptop's Stop did not take the note" >&2; exit 1; }
row "stop-gate --require-marker --verify-key" "1,000 files, the marker from git notes (signature checked)" \
  "cd $work/laptop && $sg --require-marker tests --verify-key $work/keys/vigil-marker.pub <$work/laptop-stop.json" \
  "bash $here/baseline/notes-verify.sh $work/laptop tests $work/notes-index"
row "marker-writer sync" "fetch and write out the notes, nothing new (local bare remote)" \
  "cd $work/laptop && $mw sync" "git -C $work/laptop fetch -q origin 'refs/notes/*:refs/notes/*'"

repo=$work/repo
mkdir -p "$repo"
for d in $(seq 1 100); do
  mkdir -p "$repo/dir$d"
  for f in $(seq 1 100); do printf 'file %s/%s\n' "$d" "$f" >"$repo/dir$d/f$f.txt"; done
done
git -C "$repo" init -q
git -C "$repo" add -A
git -C "$repo" -c user.name=bench -c user.email=bench@example.invalid commit -qm files
verify_row "$repo" "10,000"

# Where the bytes are: 256 MB in 8 files, hashed by several threads (MB/s below).
large=$work/large
mkdir -p "$large"
for f in $(seq 1 8); do head -c 33554432 /dev/urandom >"$large/blob$f.bin"; done
git -C "$large" init -q
git -C "$large" add -A
git -C "$large" -c user.name=bench -c user.email=bench@example.invalid commit -qm files
verify_row "$large" "8 (256 MB)"
rm -rf "$large"

# Hashing a file: marker-writer's file: subject beside sha256sum.
hash_mb=1
for mb in $sizes; do hash_mb=$mb; done
head -c "$((hash_mb * 1024 * 1024))" /dev/zero >"$work/big.bin"
row "marker-writer write" "file: subject, $hash_mb MB (baseline: sha256sum)" \
  "cd $work && $mw write --check big --subject file:big.bin --status passed" "sha256sum $work/big.bin"
rm -f "$work/big.bin"

# session-end-handoff against SessionEnd's 1.5 s budget: a repository of 100,000 files with a
# change in it, and the largest transcript; session-start-loader on a full record (a loop, a
# marker, a progress file) in the 10,000-file repository.
big=$work/big
for d in $(seq 1 1000); do
  mkdir -p "$big/d$d"
  (cd "$big/d$d" && touch f{1..100}.txt)
done
git -C "$big" init -q
git -C "$big" add -A
git -C "$big" -c user.name=bench -c user.email=bench@example.invalid commit -qm files
echo change >"$big/d1/f1.txt"
# A marker, so the handoff also computes the worktree subject (its most expensive part).
verify_row "$big" "100,000"
transcript "$work/t-end.jsonl" "$hash_mb"
jq -c --arg cwd "$big" --arg t "$work/t-end.jsonl" \
  '.cwd = $cwd | .transcript_path = $t | .session_id = "ending"' "$samples/claude-session-end.json" >"$work/end.json"
row "session-end-handoff" "SessionEnd, 100,000 files and a marker, $hash_mb MB transcript" \
  "$se <$work/end.json" "bash $here/baseline/handoff.sh $work/se-base <$work/end.json"
# The row counts only with every fact found within the deadline (the deadline cuts the rest).
"$se" <"$work/end.json"
jq -e '.git.dirty != null and .git.changed_files == ["d1/f1.txt"] and .markers[0].matches_worktree != null' \
  "$big/.vigil/handoff/final.json" >/dev/null \
  || echo "bench: at 100,000 files the handoff lost git facts to its deadline" >&2

# While the disk writes back a large file: the file written, then `sync FILE` (which starts
# its writeback and waits for it) in the background, and one handoff timed at once. The file
# doubles from 1 GiB while its writeback takes under a second (a virtual disk's cache can
# swallow gigabytes); the median of 5 rounds.
jq -c --arg cwd "$repo" '.cwd = $cwd | .session_id = "writeback" | .transcript_path = null' \
  "$samples/claude-session-end.json" >"$work/end-wb.json"
writeback_ms=()
wb_mb=1024
for round in 1 2 3 4 5; do
  while :; do
    head -c "$((wb_mb * 1048576))" /dev/zero >"$work/writeback.bin"
    sync_start=$(date +%s%N)
    sync "$work/writeback.bin" &
    syncer=$!
    start=$(date +%s%N)
    "$se" <"$work/end-wb.json" >/dev/null 2>&1 || true
    end=$(date +%s%N)
    wait "$syncer"
    synced=$(( ($(date +%s%N) - sync_start) / 1000000 ))
    rm -f "$work/writeback.bin"
    if [ "$synced" -ge 1000 ] || [ "$wb_mb" -ge 8192 ]; then break; fi
    wb_mb=$((wb_mb * 2))
  done
  writeback_ms+=("$(awk -v ns=$((end - start)) 'BEGIN { printf "%.3f", ns / 1e6 }')")
  : "$round"
done
wb=$(printf '%s\n' "${writeback_ms[@]}" | sort -n | sed -n 3p)
printf '| session-end-handoff | SessionEnd, 10,000 files and a marker, while the disk writes back %s MB | %s | | %s | |\n' \
  "$wb_mb" "$wb" "$(ratio "$wb" "$true_ms")"
rm -f "$work/t-end.jsonl"
(cd "$repo" && "$sg" loop start --session ending --max-iterations 10 --completion-promise DONE "Finish the docs" >/dev/null)
printf '# Progress\n- parser: done\n- docs: next\n' >"$repo/PROGRESS.md"
jq -c --arg cwd "$repo" '.cwd = $cwd | .session_id = "ending" | .transcript_path = null' "$samples/claude-session-end.json" >"$work/end-small.json"
"$se" <"$work/end-small.json"
bash "$here/baseline/handoff.sh" "$work/base-small" <"$work/end-small.json"
jq -c --arg cwd "$repo" '.cwd = $cwd' "$samples/claude-session-start.json" >"$work/start.json"
row "session-start-loader" "startup, a full record (loop, marker, progress)" \
  "cd $repo && $sl <$work/start.json" "cd $repo && bash $here/baseline/loader.sh $work/base-small <$work/start.json"
# The plugin: SessionStart goes through its launcher (hooks/vigil-run), which finds the version's
# binaries installed and execs the loader; every other hook execs its binary with no shell, as
# the rows above run them.
plugin_data="$work/plugin-data"
version=$(sed -n 's/^version=//p' "$here/../hooks/vigil-run")
mkdir -p "$plugin_data/$version/bin"
for b in promise-matcher stop-gate marker-writer session-end-handoff session-start-loader settings-merge; do
  ln -sf "$(dirname "$sl")/$b" "$plugin_data/$version/bin/$b"
done
row "plugin SessionStart" "the launcher, binaries installed, then the loader" \
  "cd $repo && CLAUDE_PLUGIN_DATA=$plugin_data $here/../hooks/vigil-run --install session-start-loader <$work/start.json" \
  "cd $repo && bash $here/baseline/loader.sh $work/base-small <$work/start.json"

{ yes "Step done; the old marker <<<VIGIL_DONE_$token>>> and <promise>DONE</promise> are quoted here." || true; } | head -c 1048576 >"$work/text"
row "promise-matcher defang" "1 MB of text" "$pm defang $work/text" "bash $here/baseline/defang.sh $work/text"

printf '\nThe worktree subject:\n'
printf -- '- %s\n' "${hashed[@]}"
printf '\nMachine: %s, %s cores; timer: %s, %s runs a row, medians.\n' \
  "$(uname -srm)" "$(nproc 2>/dev/null || echo '?')" "$timer" "$runs"
