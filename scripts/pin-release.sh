#!/bin/sh
# scripts/pin-release.sh SHA256_SUM [BASE_URL]: pins a release's archives into the plugin.
#
# Writes hooks/release.sha256 from dist's sha256.sum (one "<sha256> *<file>" line per artifact):
# the version, where the archives are downloaded from (default: this version's GitHub Release),
# and the checksum of each target's archive. The plugin's launcher (hooks/vigil-run) fetches
# only what this file pins. The release workflow runs it once the archives are built.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd -P)
sums=${1:?usage: scripts/pin-release.sh SHA256_SUM [BASE_URL]}
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n 1)
repository=$(sed -n 's/^repository = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n 1)
base=${2:-$repository/releases/download/v$version}
targets="x86_64-unknown-linux-musl aarch64-unknown-linux-musl x86_64-apple-darwin aarch64-apple-darwin"
pins=""
for target in $targets; do
  sum=$(sed -n "s/^\([0-9a-fA-F]\{64\}\) [ *]vigil-$target\.tar\.xz\$/\1/p" "$sums" | head -n 1)
  if [ -z "$sum" ]; then
    echo "pin-release: $sums has no checksum for vigil-$target.tar.xz" >&2
    exit 1
  fi
  pins="$pins$target $sum
"
done
out="$root/hooks/release.sha256"
tmp="$out.tmp.$$"
cat >"$tmp" <<PIN
# vigil's release archives, pinned for the plugin's launcher (hooks/vigil-run), which
# downloads only these and verifies each before it unpacks it. Written by
# scripts/pin-release.sh from the release's sha256.sum; do not edit by hand.
version $version
base $base
$pins
PIN
mv -f "$tmp" "$out"
echo "pinned vigil $version ($base) in hooks/release.sha256"
