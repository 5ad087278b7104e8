#!/usr/bin/env bash
# Baseline for stop-gate's PreToolUse guard: read the tool's file path with jq, resolve it
# with realpath, allow it inside the project (less .claude, .git/hooks, .git/config, .mcp.json)
# or the temporary directory, else print the deny. Usage: pretool.sh PROJECT < hook.json
set -u
input=$(cat)
file=$(jq -r '.tool_input.file_path // .tool_input.notebook_path // empty' <<<"$input")
cwd=$(jq -r '.cwd // empty' <<<"$input")
case $file in /*) ;; *) file=$cwd/$file ;; esac
place=$(realpath -m -- "$file")
top=$(realpath -m -- "$1")
deny() {
  jq -cn --arg r "$1" '{hookSpecificOutput: {hookEventName: "PreToolUse", permissionDecision: "deny", permissionDecisionReason: $r}}'
  exit 0
}
case $place in
  "$top"/.claude | "$top"/.claude/* | "$top"/.git/hooks/* | "$top"/.git/config | "$top"/.mcp.json) deny "vigil: $place is read-only" ;;
  "$top"/*) exit 0 ;;
  "${TMPDIR:-/tmp}"/*) exit 0 ;;
  *) deny "vigil: $place is outside the project" ;;
esac
