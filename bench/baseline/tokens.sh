#!/usr/bin/env bash
# Baseline for `stop-gate` with a loop and `--max-tokens`: the bash+jq way, which reads the
# whole transcript on every Stop and sums each message's usage once. Prints the block while
# the budget lasts. Usage: tokens.sh MAX < hook.json
set -u
max=$1
input=$(cat)
transcript=$(jq -r '.transcript_path' <<<"$input")
used=$(jq -n '[inputs | select(.type == "assistant" and .message.usage != null) | .message]
  | unique_by(.id)
  | map(.usage.input_tokens + .usage.cache_creation_input_tokens + .usage.output_tokens) | add // 0' "$transcript")
if [ "$used" -ge "$max" ]; then
  jq -n --arg m "token budget of $max spent ($used)" '{systemMessage: $m}'
  exit 0
fi
jq -n '{decision: "block", reason: "Fix the parser and keep the tests green."}'
