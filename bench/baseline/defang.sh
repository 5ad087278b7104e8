#!/usr/bin/env bash
# Baseline for `promise-matcher defang`: literal replacements with sed (it misses a prefix
# split by whitespace or escapes, which vigil's defang breaks too).
set -u
sed -e 's/<<<VIGIL_/<<<VIG-IL_/g' -e 's/<promise>/<pro-mise>/g' -e 's#</promise>#</pro-mise>#g' "$1"
