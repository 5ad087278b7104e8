#!/usr/bin/env bash
# vigil's Windows tests, run here under wine (issue 33; DEVELOPMENT.md, "Windows"): builds the
# x86_64-pc-windows-gnu target with Debian's rustc and the standard library's source
# (-Z build-std: no prebuilt Windows std can be had here), then runs the unit tests and the
# portable suite (tests/portable: the platform's contracts and the Windows smoke tests) under
# wine. Arguments go to cargo test (`--no-run` builds only). Installs what it needs with apt-get
# when run as root and something is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian's cargo is kept out of /usr/bin (a dpkg diversion): a machine whose /usr/bin has a
# cargo is no longer one "without Rust", which the installer tests need.
cargo=/usr/lib/vigil-windows/cargo
packages=()
for package in cargo-web rustc-web rust-web-src gcc-mingw-w64-x86-64 wine64; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' \
    || packages+=("$package")
done
if [ ${#packages[@]} -gt 0 ] || [ ! -x "$cargo" ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "test-windows: as root once: Debian packages ${packages[*]:-(none)}, and $cargo" >&2
    exit 2
  fi
  mkdir -p "$(dirname "$cargo")"
  dpkg-divert --quiet --local --rename --divert "$cargo" --add /usr/bin/cargo
  if [ ${#packages[@]} -gt 0 ]; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
  fi
fi

# A wine prefix of our own, made once (about 5 s, headless). Wine 8.0 lacks
# bcryptprimitives.dll, whose ProcessPrng Rust's std imports: a small DLL of ours forwards it
# to RtlGenRandom, or every .exe exits with code 53.
cache=${VIGIL_WINE_CACHE:-$HOME/.cache/vigil-wine}
export WINEPREFIX=$cache/prefix WINEDEBUG=-all
dll=$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll
if [ ! -f "$dll" ] || [ scripts/windows/process-prng.c -nt "$dll" ]; then
  mkdir -p "$cache"
  /usr/lib/wine/wine64 wineboot --init >/dev/null 2>&1
  x86_64-w64-mingw32-gcc -shared -O2 -o "$dll" scripts/windows/process-prng.c -ladvapi32
fi

# Debian's cargo and rustc (1.96), not rustup's: the std source is theirs.
export PATH=/usr/bin:$PATH RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER=x86_64-w64-mingw32-gcc
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER=/usr/lib/wine/wine64
# Its own target dir (Debian's rustc builds it, not the host's): VIGIL_WINDOWS_TARGET_DIR, which
# CI keeps in a cache that outlives the clone (.ci/run), or target/windows.
export CARGO_TARGET_DIR=${VIGIL_WINDOWS_TARGET_DIR:-target/windows}
exec "$cargo" test --locked -Z build-std=std,panic_abort --target x86_64-pc-windows-gnu \
  --lib --test portable "$@"
