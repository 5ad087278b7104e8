#!/usr/bin/env bash
# install.sh: build vigil, install its binaries, and wire its hooks into Claude Code or Codex
# without losing anything of your settings. Run ./install.sh --help for the options.
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: ./install.sh [--project DIR | --user] [--shared] [--codex [--trust]] [--prefix DIR]
                    [--run CMD | --no-run] [--require-marker CHECK[=CMD]]... [--timeout SECS]
                    [--deadline SECS] [--max-blocks N] [--feedback MODE] [--verify-key FILE]
                    [--stall-after K] [--max-duration D] [--max-tokens N]
                    [--contract FILE|default] [--contract-max-tokens N] [--desktop-notification on|off]
                    [--sync-notes REMOTE | --no-sync-notes] [--protect] [--dry-run] [--uninstall] [--check]

Builds vigil (cargo build --release --locked), installs its binaries into PREFIX/bin, and adds
its hooks to one settings file with settings-merge, which keeps everything else in it:

  (default)      DIR/.claude/settings.local.json   your own settings for the project
  --shared       DIR/.claude/settings.json         committed and shared: the commands find
                                                   vigil through PATH on each machine
  --user         ~/.claude/settings.json           every project of yours
  --codex        DIR/.codex/hooks.json             Codex (with --user: ~/.codex/hooks.json)

Options:
  --project DIR  the project to wire (default: the git top level of the current directory)
  --prefix DIR   where binaries go: DIR/bin (default ~/.local)
  --run CMD      the check stop-gate runs before letting the agent stop, e.g. 'cargo test';
                 a re-install keeps the gate's flags it is not given (--no-run removes the check)
  --require-marker CHECK[=CMD]
                 repeatable: a stop needs a passed marker for CHECK (--no-require-marker CHECK)
  --timeout SECS, --deadline SECS, --max-blocks N, --feedback block|context, --verify-key FILE,
  --stall-after K, --max-duration D, --max-tokens N, --contract FILE|default,
  --contract-max-tokens N, --desktop-notification on|off
                 the same flags of stop-gate (stop-gate --help); --contract also wires
                 SubagentStop to stop-gate
  --sync-notes REMOTE
                 each session start syncs the markers CI published as git notes from REMOTE
                 (origin, or a URL) in the background (marker-writer sync); --no-sync-notes
                 takes it out
  --trust        with --codex: record Codex's trust for vigil's hooks in ~/.codex/config.toml
                 (Codex skips a hook it does not trust)
  --protect      Claude Code: the sandbox on (needs bubblewrap and socat on Linux), unsandboxed
                 retries off, and the Edit and Write tools denied vigil's state home, binaries
                 and settings, so the agent cannot end or change a loop by writing its files;
                 with --codex, Codex's workspace-write sandbox for the project
  --dry-run      build, then print the diff the settings change would make; change nothing
  --uninstall    remove vigil's hooks from the settings file (the binaries stay)
  --check        report whether vigil is wired and runs (settings-merge check); --verbose adds
                 the detail behind each line
  -h, --help     this text

VIGIL_BUILT_DIR=DIR uses binaries already built in DIR instead of building.
USAGE
}


# stop-gate's flags, each defined once (src/cli/stop-gate.flags, tab-separated): which of them
# an install takes, and the rule a value must meet. stop-gate's own parser implements the same
# rules; a test holds the two to the same answers.
flag_table=$(cd "$(dirname "$0")" && pwd)/src/cli/stop-gate.flags

# The rule of an install flag ("-" for one that takes no value), or nothing.
install_rule() {
  if [ ! -f "$flag_table" ]; then
    echo "install.sh: $flag_table is missing; run install.sh from vigil's source" >&2
    exit 2
  fi
  # A flag is letters and dashes; it reaches awk through the environment, never as a program
  # or a -v value (which would expand escapes: --ru\156 is not --run).
  [[ $1 =~ ^--[a-z][a-z-]*$ ]] || return 0
  flag=$1 awk -F'\t' '!/^#/ && $1 == ENVIRON["flag"] && ("," $4 ",") ~ /,install,/ { print $3; exit }' "$flag_table"
}

# Refuses a table whose numbers are not numbers: bash would evaluate them.
table_numbers() {
  [[ $1 =~ ^[0-9]+$ && $2 =~ ^[0-9]+$ ]] || refuse_value "the flag table's rule for $3 is not two numbers: $1 $2"
}

# What Rust's trim takes away as white space (Unicode White_Space): a command of nothing but
# these is no command.
unicode_blanks=($'\xc2\x85' $'\xc2\xa0' $'\xe1\x9a\x80' $'\xe2\x80\x80' $'\xe2\x80\x81' $'\xe2\x80\x82'
  $'\xe2\x80\x83' $'\xe2\x80\x84' $'\xe2\x80\x85' $'\xe2\x80\x86' $'\xe2\x80\x87' $'\xe2\x80\x88'
  $'\xe2\x80\x89' $'\xe2\x80\x8a' $'\xe2\x80\xa8' $'\xe2\x80\xa9' $'\xe2\x80\xaf' $'\xe2\x81\x9f'
  $'\xe3\x80\x80')
only_blanks() {
  local rest=$1 blank
  for blank in "${unicode_blanks[@]}"; do rest=${rest//"$blank"/}; done
  ! [[ $rest =~ [^[:space:]] ]]
}

refuse_value() {
  echo "install.sh: $1; nothing was built or changed" >&2
  exit 2
}

check_name() {
  if ! [[ $2 =~ ^[A-Za-z0-9._-]{1,64}$ ]] || [ "$2" = . ] || [ "$2" = .. ]; then
    refuse_value "$1: check name \"$2\" is not 1 to 64 of A-Z a-z 0-9 . _ - (and not . or ..)"
  fi
}

# Refuses VALUE for FLAG unless it meets RULE (the table's rules; numbers past 15 digits, 18 for
# a whole number, are refused here though stop-gate would take some).
check_value() {
  local flag=$1 value=$2 rule=$3 min max digits choices
  case $rule in
    command)
      ! only_blanks "$value" || refuse_value "$flag needs a command" ;;
    int:*)
      IFS=: read -r _ min max <<<"$rule"
      table_numbers "$min" "$max" "$flag"
      if ! [[ $value =~ ^\+?[0-9]{1,18}$ ]] || (( 10#${value#+} < min || 10#${value#+} > max )); then
        refuse_value "$flag takes a whole number from $min to $max, not \"$value\""
      fi ;;
    stall:*)
      IFS=: read -r _ min max <<<"$rule"
      table_numbers "$min" "$max" "$flag"
      if ! [[ $value =~ ^\+?[0-9]{1,9}$ ]] \
        || { (( 10#${value#+} != 0 )) && (( 10#${value#+} < min || 10#${value#+} > max )); }; then
        refuse_value "$flag takes 0 (never) or a whole number of passes from $min to $max, not \"$value\""
      fi ;;
    enum:*)
      min=${rule#enum:}
      local choice found=false
      IFS=: read -r -a choices <<<"$min"
      for choice in "${choices[@]}"; do [ "$value" = "$choice" ] && found=true; done
      $found || refuse_value "$flag is ${min//:/ or }, not \"$value\"" ;;
    duration|duration:1)
      if ! [[ $value =~ ^[0-9]{1,15}[smhd]$ ]]; then
        refuse_value "$flag: \"$value\" is not a duration; write a whole number and a unit, e.g. 45s, 30m, 24h or 7d"
      fi
      digits=${value%?}
      if [ "$rule" = duration:1 ] && (( 10#$digits == 0 )); then
        refuse_value "$flag takes a duration of a second or more (45s, 30m, 2h, 7d), not \"$value\""
      fi ;;
    tokens)
      digits=${value%[kKmM]}
      if ! [[ $digits =~ ^\+?[0-9]{1,15}$ ]] || (( 10#${digits#+} == 0 )); then
        refuse_value "$flag takes a whole number of tokens (500000, 500k, 2m), not \"$value\""
      fi ;;
    marker) check_name "$flag" "${value%%=*}" ;;
    contract) [ -n "$value" ] || refuse_value "$flag needs a JSON Schema file, or \`default\`" ;;
    remote)
      if [ -z "$value" ] || [[ $value == -* ]]; then
        refuse_value "$flag needs a remote: a name (origin) or a URL"
      fi ;;
    text|path) ;;
    *) refuse_value "the flag table gives $flag a rule install.sh does not know: $rule" ;;
  esac
}

project=$PWD
project_given=false
user=false
shared=false
codex=false
trust=false
protect=false
prefix=${HOME}/.local
gate_flags=()
dry_run=false
verbose=false
action=install

while [ $# -gt 0 ]; do
  case $1 in
    --project) [ $# -ge 2 ] || refuse_value "--project needs a directory"; project=$2; project_given=true; shift 2 ;;
    --project=*) project=${1#*=}; project_given=true; shift ;;
    --user) user=true; shift ;;
    --shared) shared=true; shift ;;
    --codex) codex=true; shift ;;
    --trust) trust=true; shift ;;
    --protect) protect=true; shift ;;
    --prefix) [ $# -ge 2 ] || refuse_value "--prefix needs a directory"; prefix=$2; shift 2 ;;
    --prefix=*) prefix=${1#*=}; shift ;;
    --dry-run) dry_run=true; shift ;;
    --uninstall) action=uninstall; shift ;;
    --check) action=check; shift ;;
    --verbose) verbose=true; shift ;;
    -h|--help) usage; exit 0 ;;
    --*)
      # stop-gate's flags an install writes into the Stop handler, as the table defines them;
      # a value is checked here, before anything is built.
      name=${1%%=*}
      rule=$(install_rule "$name")
      if [ -z "$rule" ]; then
        echo "install.sh: unknown option $1; see ./install.sh --help" >&2
        exit 2
      elif [ "$rule" = - ]; then
        [ "$name" = "$1" ] || refuse_value "$name takes no value"
        gate_flags+=("$name"); shift
      else
        if [ "$name" != "$1" ]; then
          value=${1#*=}; shift
        elif [ $# -ge 2 ]; then
          value=$2; shift 2
        else
          refuse_value "$name needs a value"
        fi
        check_value "$name" "$value" "$rule"
        gate_flags+=("$name" "$value")
      fi ;;
    *) echo "install.sh: unknown option $1; see ./install.sh --help" >&2; exit 2 ;;
  esac
done

if $trust && ! $codex; then
  echo "install.sh: --trust is for Codex: give it with --codex" >&2
  exit 2
fi
if $protect && [ "$action" != install ]; then
  echo "install.sh: --protect is an install option (--uninstall takes back what it added)" >&2
  exit 2
fi
if [ ${#gate_flags[@]} -gt 0 ] && [ "$action" != install ]; then
  echo "install.sh: the gate's flags (--run, --require-marker, --timeout...) are install options" >&2
  exit 2
fi
if $verbose && [ "$action" != check ]; then
  echo "install.sh: --verbose goes with --check" >&2
  exit 2
fi
if $user && $shared; then
  echo "install.sh: --user and --shared exclude each other" >&2
  exit 2
fi
given_project=$project
project=$(cd "$project" 2>/dev/null && pwd) || { echo "install.sh: the project directory $given_project does not exist" >&2; exit 2; }
# The project is the git top level (SPEC §2): run in a subdirectory, install.sh wires the top,
# where Claude Code and Codex find the settings and vigil's hooks run the check. A directory
# named with --project is taken as it is (a project inside a monorepo).
# The settings file install.sh works on in the project DIR.
settings_in() {
  if $codex; then echo "$1/.codex/hooks.json"
  elif $shared; then echo "$1/.claude/settings.json"
  else echo "$1/.claude/settings.local.json"; fi
}
if ! $project_given && ! $user; then
  top=$(git -C "$project" rev-parse --show-toplevel 2>/dev/null) || top=
  if [ -n "$top" ] && [ "$top" = "$(cd "$HOME" 2>/dev/null && pwd -P)" ]; then
    echo "install.sh: $project is inside your home directory's git repository ($top); name the project with --project DIR" >&2
    exit 2
  fi
  if [ -n "$top" ]; then
    # An --uninstall or --check where an earlier install wired this very directory is about
    # that install.
    if [ "$top" != "$(cd "$project" && pwd -P)" ] \
      && ! { [ "$action" != install ] && grep -qs 'stop-gate' "$(settings_in "$project")"; }; then
      echo "install.sh: $project is inside the git repository $top; working on its top level, which is vigil's project (name another with --project DIR)" >&2
      project=$top
    fi
  elif [ "$action" = install ]; then
    echo "install.sh: $project is not inside a git repository, so it has no top level to be the project; name the project with --project DIR" >&2
    exit 2
  fi
fi
source_dir=$(cd "$(dirname "$0")" && pwd)
# Run from inside vigil's own clone, the default project is the clone: wiring vigil into
# itself is never what a newcomer means, and leaves the clone dirty.
if ! $project_given && ! $user && [ "$action" != check ] && [ "$project" = "$source_dir" ]; then
  echo "install.sh: this is vigil's own clone; run it from your project (cd your-project && $source_dir/install.sh), or name it with --project DIR" >&2
  exit 2
fi
bin_dir=$prefix/bin

if $codex; then
  if $user; then settings=$HOME/.codex/hooks.json; else settings=$project/.codex/hooks.json; fi
elif $user; then
  settings=$HOME/.claude/settings.json
elif $shared; then
  settings=$project/.claude/settings.json
else
  settings=$project/.claude/settings.local.json
fi

merge_flags=(--settings "$settings")
$codex && merge_flags+=(--codex)
if $user; then commands=$HOME/.claude/commands; else commands=$project/.claude/commands; fi

# A slash command as installed: the template with stop-gate named by its absolute path, so the
# command works whether or not PREFIX/bin is on the PATH Claude Code runs it with. Not for
# --shared (the files are committed, and every machine installs vigil elsewhere) nor for a
# PREFIX with characters that would need quoting inside the command's YAML front matter: then
# the template as it is, which finds stop-gate on PATH.
absolute_commands=true
$shared && absolute_commands=false
case $bin_dir in *[!A-Za-z0-9_./-]*) absolute_commands=false ;; esac
with_absolute_path() {
  local text
  text=$(cat "$1")
  printf '%s\n' "${text//"stop-gate loop"/"$bin_dir/stop-gate loop"}"
}
render_command() {
  if $absolute_commands; then with_absolute_path "$1"; else cat "$1"; fi
}
# A command file install.sh wrote: the template as it is, or with PREFIX's absolute path in
# it; anything else is the user's.
ours() {
  [ -f "$2" ] && { cmp -s "$1" "$2" || with_absolute_path "$1" | cmp -s - "$2"; }
}

if [ "$action" = install ]; then
  # VIGIL_BUILT_DIR: binaries already built (by a packager, or the test suite); no build then.
  built=${VIGIL_BUILT_DIR:-}
  if [ -z "$built" ]; then
    if ! command -v cargo >/dev/null 2>&1; then
      echo "install.sh: cargo is not installed; install Rust (rustup.rs) and run ./install.sh again, or install a release without Rust: sh $source_dir/hooks/vigil-run --to ~/.local/bin (see the README's \"From a release\"), or the Claude Code plugin" >&2
      exit 1
    fi
    echo "install.sh: building vigil (cargo build --release --locked, static on Linux; a few minutes the first time)" >&2
    built=$("$source_dir/scripts/release-build.sh")
  fi
  if $dry_run; then
    flags=("${merge_flags[@]}" --dry-run --bin-dir "$bin_dir")
    $shared && flags=("${merge_flags[@]}" --dry-run --shared)
    flags+=("${gate_flags[@]}")
    $protect && flags+=(--protect)
    exec "$built/settings-merge" install "${flags[@]}"
  fi
  mkdir -p "$bin_dir"
  for binary in promise-matcher stop-gate marker-writer session-end-handoff session-start-loader settings-merge; do
    install -m 0755 "$built/$binary" "$bin_dir/$binary"
  done
  echo "install.sh: installed the binaries into $bin_dir" >&2
  flags=("${merge_flags[@]}" --bin-dir "$bin_dir")
  $shared && flags=("${merge_flags[@]}" --shared)
  flags+=("${gate_flags[@]}")
  $trust && flags+=(--trust)
  $protect && flags+=(--protect)
  "$bin_dir/settings-merge" install "${flags[@]}"
  # The slash commands that start and cancel a loop, for Claude Code; the user's own
  # files of the same name are never replaced.
  if ! $codex; then
    mkdir -p "$commands"
    for file in "$source_dir"/templates/commands/*.md; do
      name=$(basename "$file")
      if [ ! -e "$commands/$name" ] || ours "$file" "$commands/$name"; then
        render_command "$file" >"$commands/$name.vigil-tmp"
        mv -f "$commands/$name.vigil-tmp" "$commands/$name"
      else
        echo "install.sh: kept your own $commands/$name" >&2
      fi
    done
    if ! $absolute_commands && ! $shared; then
      echo "install.sh: note: $bin_dir needs quoting, so /vigil-loop finds stop-gate on PATH; put $bin_dir on it" >&2
    fi
  fi
  case ":$PATH:" in
    *":$bin_dir:"*) ;;
    *) echo "install.sh: note: $bin_dir is not on your PATH; the hooks use absolute paths, but add it to run vigil's commands yourself" >&2 ;;
  esac
  exit 0
fi

merge=
for candidate in "$bin_dir/settings-merge" "$source_dir"/target/*-linux-gnu/release/settings-merge "$source_dir/target/release/settings-merge"; do
  if [ -x "$candidate" ]; then merge=$candidate; break; fi
done
if [ -z "$merge" ]; then
  echo "install.sh: settings-merge is not in $bin_dir nor built in $source_dir/target; run ./install.sh (with the same --prefix) first" >&2
  exit 1
fi
if [ "$action" = uninstall ]; then
  if $dry_run; then exec "$merge" uninstall "${merge_flags[@]}" --dry-run; fi
  said=$("$merge" uninstall "${merge_flags[@]}")
  printf '%s\n' "$said"
  # The slash commands go too, once no settings file here runs vigil any more, and only when
  # they are still exactly as install.sh wrote them.
  # A vigil hook uninstall could not take out (one edited by hand) still runs /vigil-loop's
  # loops: its commands stay with it.
  if ! $codex && [ -e "$settings" ] && grep -q 'stop-gate' "$settings"; then
    echo "install.sh: $settings still runs stop-gate (an entry uninstall left as it is); the slash commands in $commands stay until it goes" >&2
  elif ! $codex && ! grep -q '^vigil stays installed in ' <<<"$said"; then
    for file in "$source_dir"/templates/commands/*.md; do
      name=$(basename "$file")
      if ours "$file" "$commands/$name"; then
        rm -f "$commands/$name"
      fi
    done
    rmdir "$commands" 2>/dev/null || true
    # And a project's .claude/ that nothing else is in any more.
    $user || rmdir "$project/.claude" 2>/dev/null || true
  fi
  echo "install.sh: the binaries stay in $bin_dir (other projects may use them); remove them by hand if you want" >&2
else
  if $verbose; then merge_flags+=(--verbose); fi
  exec "$merge" check "${merge_flags[@]}"
fi
