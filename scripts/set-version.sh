#!/bin/sh
# scripts/set-version.sh VERSION: moves every place that names vigil's version to VERSION.
#
# Cargo.toml and Cargo.lock, the plugin's manifest and marketplace entry, the launcher and the
# hooks' paths (hooks/vigil-run, hooks/hooks.json), and a CHANGELOG.md heading when there is
# none. The pinned checksums of the old release (hooks/release.sha256) are removed: they pin
# another version's archives, and scripts/pin-release.sh writes the new ones once the release
# is built. tests/integration/release.rs fails when any of these disagree.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd -P)
new=${1:?usage: scripts/set-version.sh VERSION}
# Semver: MAJOR.MINOR.PATCH, optionally -PRERELEASE (what cargo takes), on one line.
case $new in
  *'
'*)
    echo "set-version: a version is one line" >&2
    exit 2
    ;;
esac
if ! printf '%s\n' "$new" | grep -Eq '^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$'; then
  echo "set-version: $new is not a version (MAJOR.MINOR.PATCH, e.g. 0.2.0)" >&2
  exit 2
fi
old=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n 1)
# Literal in sed patterns: the dots of the old version.
was=$(printf '%s' "$old" | sed 's/[.]/\\./g')

# through FILE COMMAND...: rewrites FILE through COMMAND (reading it on stdin), renaming a temp
# file that keeps FILE's mode into place.
through() {
  file="$root/$1"
  shift
  cp -p "$file" "$file.tmp.$$" && "$@" <"$file" >"$file.tmp.$$" && mv -f "$file.tmp.$$" "$file"
}
edit() {
  through "$1" sed "$2"
}
# Cargo.toml: the package's own version is its first `version =` line.
through Cargo.toml awk -v new="$new" \
  '!done && /^version = "/ { print "version = \"" new "\""; done = 1; next } { print }'
through Cargo.lock awk -v new="$new" '
  /^name = "vigil"$/ { vigil = 1; print; next }
  vigil && /^version = "/ { print "version = \"" new "\""; vigil = 0; next }
  /^\[\[package\]\]/ { vigil = 0 }
  { print }'
if [ -f "$root/fuzz/Cargo.lock" ]; then
  through fuzz/Cargo.lock awk -v new="$new" '
    /^name = "vigil"$/ { vigil = 1; print; next }
    vigil && /^version = "/ { print "version = \"" new "\""; vigil = 0; next }
    /^\[\[package\]\]/ { vigil = 0 }
    { print }'
fi
edit .claude-plugin/plugin.json "s/\"version\": \"$was\"/\"version\": \"$new\"/"
edit .claude-plugin/marketplace.json "s/\"version\": \"$was\"/\"version\": \"$new\"/"
edit hooks/vigil-run "s/^version=$was\$/version=$new/"
edit hooks/hooks.json "s#/$was/bin/#/$new/bin/#g"
# Pins of another version are the old release's: the new ones come when it is built.
if [ -f "$root/hooks/release.sha256" ] && ! grep -qx "version $new" "$root/hooks/release.sha256"; then
  rm -f "$root/hooks/release.sha256"
fi
if ! grep -q "^## $new\( \|\$\)" "$root/CHANGELOG.md"; then
  through CHANGELOG.md awk -v new="$new" \
    '!done && /^## / { print "## " new " (unreleased)\n"; done = 1 } { print }'
fi
echo "vigil $old -> $new; write its CHANGELOG.md entry, then tag v$new"
