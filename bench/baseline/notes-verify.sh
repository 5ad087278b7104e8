#!/usr/bin/env bash
# The bash+jq way to take CI's verdict from git notes: the tree of the working tree (git add -A
# into an empty index), the note for it, and its newest payload checked with jq. (It checks no
# signature: jq cannot.)
set -euo pipefail
dir=$1 check=$2 index=$3
rm -f "$index"
tree=$(GIT_INDEX_FILE=$index git -C "$dir" add -A && GIT_INDEX_FILE=$index git -C "$dir" write-tree)
note=$(git -C "$dir" notes --ref "vigil/$check" show "$tree" 2>/dev/null) || { echo "missing"; exit 1; }
printf '%s\n' "$note" | grep -v '^$' | jq -e -s --arg check "$check" --arg subject "git-tree:$tree" \
  'map(select(.check == $check and .subject == $subject and .status == "passed")) | length > 0' >/dev/null
