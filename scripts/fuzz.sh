#!/usr/bin/env bash
# Runs every fuzz target (fuzz/fuzz_targets/) for SECONDS each (default 15) with libFuzzer, as
# cargo-fuzz would build them: Rust nightly, sanitizer coverage, debug assertions. The corpus
# grows in $VIGIL_FUZZ_DIR (default target/fuzz-run) from run to run. An input that breaks a
# target is kept in fuzz/regressions/<target>/, which plain `cargo test` replays
# (tests/integration/fuzz_regressions.rs): commit it with the fix. Exits 1 when one broke.
set -euo pipefail

seconds=${1:-15}
source_dir=$(cd "$(dirname "$0")/.." && pwd)
work=${VIGIL_FUZZ_DIR:-$source_dir/target/fuzz-run}
host=$(rustc -vV | sed -n 's/^host: //p')
if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "fuzz: Rust nightly is not installed (rustup toolchain install nightly --profile minimal)" >&2
  exit 2
fi
flags="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4"
flags+=" -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table"
flags+=" -Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
# Given for the target only (--target), so that build scripts and proc macros build plainly.
RUSTFLAGS=$flags cargo +nightly build --release --locked --quiet \
  --manifest-path "$source_dir/fuzz/Cargo.toml" --target "$host" --target-dir "$work/build" --bins
broke=()
for target in hook_input promise records settings terminal; do
  corpus=$work/corpus/$target
  kept=$source_dir/fuzz/regressions/$target
  mkdir -p "$corpus" "$kept"
  # The kept inputs seed the corpus; a crash is written into the kept ones.
  if ! "$work/build/$host/release/$target" -max_total_time="$seconds" -rss_limit_mb=2048 \
    -timeout=10 -print_final_stats=1 -artifact_prefix="$kept/" "$corpus" "$kept" \
    >"$work/$target.log" 2>&1; then
    broke+=("$target")
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$target.log")
  printf 'fuzz: %-10s %s runs in %s s%s\n' "$target" "${runs:-?}" "$seconds" \
    "$([ ${#broke[@]} -gt 0 ] && [ "${broke[-1]}" = "$target" ] && echo ', BROKE: see '"$work/$target.log")"
done
if [ ${#broke[@]} -gt 0 ]; then
  echo "fuzz: ${broke[*]} broke; the inputs are in fuzz/regressions/ (commit them with the fix)" >&2
  exit 1
fi
