#!/usr/bin/env bash
# Writes what the Debian package installs beside the binary, generated from
# it: completions for bash, zsh and fish, and the man pages keysmith(1) and
# keysmith-SUBCOMMAND(1), gzipped (gzip -n: reproducible), and the upstream
# changelog as Debian names it (changelog.gz).
# Usage: gen-assets.sh KEYSMITH_BINARY OUT_DIR
set -euo pipefail
bin=$1 out=$2
rm -rf "$out"
mkdir -p "$out/man"
"$bin" completions bash > "$out/keysmith.bash"
"$bin" completions zsh > "$out/_keysmith"
"$bin" completions fish > "$out/keysmith.fish"
gzip -9n < "$(dirname "$0")/../../CHANGELOG.md" > "$out/changelog.gz"
"$bin" man | gzip -9n > "$out/man/keysmith.1.gz"
# A page for every subcommand `keysmith --help` lists (but clap's `help`).
subs=$("$bin" --help | awk '/^Commands:/ {on = 1; next} on && /^$/ {exit} on && $1 != "help" {print $1}')
[ -n "$subs" ] || { echo "gen-assets: no subcommands in '$bin --help'" >&2; exit 1; }
for sub in $subs; do
  "$bin" man "$sub" | gzip -9n > "$out/man/keysmith-$sub.1.gz"
done
