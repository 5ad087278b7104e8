#!/usr/bin/env bash
# Baseline for `promise-matcher scan`: tail, strip escapes and whitespace, grep.
# Usage: scan.sh MARKER FILE. No screen replay: a bash pipeline has none.
set -u
tail -c 65536 "$2" \
  | perl -pe 's/\e\[[0-?]*[ -\/]*[@-~]//g; s/\e\][^\a\e]*(?:\a|\e\\)//g; s/\e.//g; s/[\x00-\x1f\x7f]//g' \
  | tr -d '[:space:]' \
  | grep -qF -- "$1"
