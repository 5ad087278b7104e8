#!/usr/bin/env bash
# Builds vigil's binaries as they are installed (install.sh) and measured (bench/run.sh):
# `cargo build --release --locked`, linked statically on Linux with glibc. A hook is a process
# that lives a millisecond or two, and without the dynamic loader it starts about 0.3 ms
# sooner (the loader's relocations and the mapping of libc cost more than a Stop's own work).
# Where the static link cannot be made (no libc.a, another libc, another system), the build
# is the usual dynamic one. Prints the directory that holds the binaries.
set -euo pipefail

source_dir=$(cd "$(dirname "$0")/.." && pwd)
# Its own target dir: a CARGO_TARGET_DIR in the environment must not send the build elsewhere.
# Not quiet: the first build takes minutes, and cargo shows its progress on stderr.
build=(cargo build --release --locked --manifest-path "$source_dir/Cargo.toml" --target-dir "$source_dir/target")
host=$(rustc -vV 2>/dev/null | sed -n 's/^host: //p')
case $host in
  *-linux-gnu)
    # Given for the target only, so that build scripts and proc macros stay dynamic.
    flags=CARGO_TARGET_$(printf '%s' "$host" | tr 'a-z.-' 'A-Z__')_RUSTFLAGS
    if env "$flags=-C target-feature=+crt-static" "${build[@]}" --target "$host"; then
      printf '%s\n' "$source_dir/target/$host/release"
      exit 0
    fi
    echo "release-build: the static link failed; building with the dynamic loader instead" >&2
    ;;
esac
"${build[@]}"
printf '%s\n' "$source_dir/target/release"
