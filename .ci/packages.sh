#!/usr/bin/env bash
# Packages that install, each from a clean state (issue 39):
#   1. crates    `cargo package` of every publishable crate, together (the
#                unpublished path dependencies resolve to the packages just
#                made); each .crate holds README.md, LICENSE-MIT and
#                LICENSE-APACHE and its manifest the crates.io metadata; the
#                lab crates are publish = false. KEYSMITH_PACKAGE_VERIFY=1 also
#                builds each .crate (cargo's verify step; slow, not by default).
#   2. python    `python -m build` of clients/python: the sdist and the wheel
#                each install into a fresh venv and pass the smoke test
#                (packaging/smoke/smoke.py) against a real `keysmith serve`.
#   3. npm       `npm pack` of clients/typescript installs into a fresh project
#                (npm init; npm install ./keysmith-client-*.tgz), passes the
#                same smoke test (smoke.mjs), and a .ts file type-checks
#                against its declarations (tsc --noEmit, strict).
#   4. debian    cargo-deb packages the binary with the systemd unit, config,
#                completions and man pages; `systemd-analyze verify` checks the
#                unit; `dpkg -i` installs it (no running systemd needed), then
#                `keysmith --version` from /usr/bin, the completions and man
#                pages are checked, the shipped config is parsed by the
#                installed binary, and the package is purged again. Before
#                that, `lintian --fail-on error` on the .deb and
#                `mandoc -T lint -W warning` on every man page.
#
# Takes the binary from $KEYSMITH_BIN (else builds `cargo build -p keysmith-cli`).
# Installs when missing: cargo-deb (cargo install --locked, pinned, into the
# target dir), python3-venv, systemd, man-db, dpkg-dev, lintian, mandoc (apt, as root); pip installs `build` into a venv
# and npm installs typescript (pinned) into the scratch project; nothing global.
# Prints the seconds each part took.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

CARGO_DEB_VERSION=3.8.0
TYPESCRIPT_VERSION=5.9.3
BUILD_VERSION=1.6.1
TWINE_VERSION=7.0.0

log() { printf '\n=== packages: %s\n' "$*"; }
die() { printf '\npackages: %s\n' "$*" >&2; exit 1; }
target=$(realpath -m "${CARGO_TARGET_DIR:-$root/target}")
work=$(mktemp -d)
server_pid=
cleanup() {
  [ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
declare -A took
timed() { # timed NAME FUNCTION: runs it, records its seconds
  local start=$SECONDS
  "$2"
  took[$1]=$((SECONDS - start))
}

# --- 1. crates ---------------------------------------------------------------
publishable=(keysmith-core keysmith-sqlite keysmith-postgres keysmith-mysql keysmith-etcd
  keysmith keysmith-client keysmith-cli keysmith-server)
unpublished=(keysmith-bench keysmith-testsupport keysmith-model keysmith-loom)

crates() {
  log "cargo package (${publishable[*]})"
  # Manifest metadata crates.io shows, and publish = false on the lab.
  cargo metadata --no-deps --format-version 1 | python3 -c '
import json, sys
pub, unpub = sys.argv[1].split(), sys.argv[2].split()
bad = []
for p in json.load(sys.stdin)["packages"]:
    name = p["name"]
    if name in unpub:
        if p["publish"] != []:
            bad.append(f"{name}: needs publish = false")
    elif name in pub:
        for field in ("description", "license", "repository", "readme", "keywords", "categories", "rust_version"):
            if not p.get(field):
                bad.append(f"{name}: no {field}")
    else:
        bad.append(f"{name}: neither publishable nor listed as unpublished in .ci/packages.sh")
if bad:
    sys.exit("crate metadata: " + "; ".join(bad))
' "${publishable[*]}" "${unpublished[*]}"
  local verify=--no-verify
  [ "${KEYSMITH_PACKAGE_VERIFY:-0}" = 1 ] && verify=
  local args=()
  for c in "${publishable[@]}"; do args+=(-p "$c"); done
  rm -rf "$target/package"
  cargo package --locked $verify "${args[@]}"
  for c in "${publishable[@]}"; do
    local crate="$target/package/$c-0.1.0.crate"
    [ -f "$crate" ] || crate=$(ls "$target/package/$c"-[0-9]*.crate)
    local list
    list=$(tar tzf "$crate")
    for f in README.md LICENSE-MIT LICENSE-APACHE Cargo.toml; do
      grep -qx "$c-[^/]*/$f" <<<"$list" || die "$crate lacks $f"
    done
    # Every file git tracks under the crate (but what `exclude` leaves out
    # on purpose: none today) is in the package.
    local name=${crate##*/}; name=${name%.crate}
    local missing
    missing=$(cd "crates/$c" && git ls-files | grep -v '^LICENSE-' | while read -r f; do
      grep -qxF "$name/$f" <<<"$list" || echo "$f"; done)
    [ -z "$missing" ] || die "$crate lacks tracked files: $missing"
    printf '%s: %s files\n' "$crate" "$(wc -l <<<"$list")"
  done
}

# --- the server the smoke tests talk to --------------------------------------
start_server() {
  if [ -z "${KEYSMITH_BIN:-}" ]; then
    cargo build -q -p keysmith-cli
    KEYSMITH_BIN="$target/debug/keysmith"
  fi
  KEYSMITH_BIN=$(realpath "$KEYSMITH_BIN")
  "$KEYSMITH_BIN" serve --listen 127.0.0.1:0 --store "sqlite://$work/smoke.db" \
    --counter-dir "$work/counters" >"$work/server.log" 2>&1 &
  server_pid=$!
  local line=
  for _ in $(seq 300); do
    line=$(grep -o 'listening on http://[0-9.:]*' "$work/server.log" || true)
    [ -n "$line" ] && break
    kill -0 "$server_pid" 2>/dev/null || die "keysmith serve exited: $(cat "$work/server.log")"
    sleep 0.1
  done
  [ -n "$line" ] || die "keysmith serve did not say where it listens: $(cat "$work/server.log")"
  export KEYSMITH_URL=${line#listening on }
  echo "smoke tests against $KEYSMITH_URL"
}

# --- 2. python ---------------------------------------------------------------
python_packages() {
  log "python -m build (clients/python), sdist and wheel into fresh venvs"
  if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
    [ "$(id -u)" = 0 ] || die "python3 has no venv module: apt-get install python3-venv"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
  fi
  local pip=(--quiet --disable-pip-version-check)
  python3 -m venv "$work/build-venv"
  "$work/build-venv/bin/pip" install "${pip[@]}" "build==$BUILD_VERSION" "twine==$TWINE_VERSION"
  # The licence texts are files of their own, the same as the repository's:
  # a symlink out of the package breaks the wheel built from the sdist
  # (LinkOutsideDestinationError), as PyPI users and packagers build it.
  for f in LICENSE-MIT LICENSE-APACHE; do
    [ -f "clients/python/$f" ] && [ ! -L "clients/python/$f" ] || die "clients/python/$f must be a file, not a symlink"
    cmp -s "$f" "clients/python/$f" || die "clients/python/$f differs from $f: copy it again"
  done
  # From a copy: the build sees what git tracks, not a developer's .venv;
  # symlinks are copied as symlinks (-P), as an sdist would carry them.
  mkdir -p "$work/py-src"
  git ls-files -z clients/python | (cd "$root" && xargs -0 cp -P --parents -t "$work/py-src")
  # The ordinary build: the sdist, then the wheel from the sdist.
  "$work/build-venv/bin/python" -m build --outdir "$work/dist" "$work/py-src/clients/python" >/dev/null
  "$work/build-venv/bin/twine" check --strict "$work"/dist/*
  local sdist wheel
  sdist=$(ls "$work"/dist/keysmith_client-*.tar.gz)
  wheel=$(ls "$work"/dist/keysmith_client-*.whl)
  # The package has type hints: the marker is in both.
  # (Lists read whole before grep: under pipefail, grep -q would cut them off.)
  grep -q 'keysmith_client/py.typed' <<<"$(python3 -m zipfile -l "$wheel")" || die "$wheel lacks py.typed"
  grep -q 'keysmith_client/py.typed' <<<"$(tar tzf "$sdist")" || die "$sdist lacks py.typed"
  for f in LICENSE-MIT LICENSE-APACHE; do
    grep -q "$f" <<<"$(python3 -m zipfile -l "$wheel")" || die "$wheel lacks $f"
    grep -q "$f" <<<"$(tar tzf "$sdist")" || die "$sdist lacks $f"
  done
  for artifact in "$sdist" "$wheel"; do
    local venv="$work/venv-${artifact##*.}"
    python3 -m venv "$venv"
    "$venv/bin/pip" install "${pip[@]}" "$artifact"
    # Run from the scratch dir: the import must come from the installed package.
    (cd "$work" && "$venv/bin/python" "$root/packaging/smoke/smoke.py" "${artifact##*/}")
  done
}

# --- 3. npm ------------------------------------------------------------------
npm_package() {
  log "npm pack (clients/typescript) into a fresh project"
  # prepack compiles with the client's own (locked) typescript.
  (cd clients/typescript && npm ci --no-audit --no-fund --silent)
  local tgz
  tgz=$(cd clients/typescript && npm pack --silent --pack-destination "$work")
  tgz="$work/$tgz"
  for f in dist/index.d.ts dist/index.js README.md LICENSE-MIT LICENSE-APACHE; do
    grep -qx "package/$f" <<<"$(tar tzf "$tgz")" || die "$tgz lacks $f"
  done
  mkdir -p "$work/ts-project"
  cp packaging/smoke/smoke.mjs packaging/smoke/check.ts "$work/ts-project/"
  (
    cd "$work/ts-project"
    npm init -y >/dev/null
    npm pkg set type=module
    npm install --no-audit --no-fund --silent "$tgz" "typescript@$TYPESCRIPT_VERSION"
    # No skipLibCheck: the package's declarations are checked too.
    npx --no-install tsc --noEmit --strict --target es2022 --lib es2022,dom \
      --module nodenext --moduleResolution nodenext check.ts
    node smoke.mjs
  )
}

# --- 4. debian ---------------------------------------------------------------
debian_package() {
  log "cargo deb (keysmith-cli): unit, config, completions, man pages; dpkg -i"
  # Debian packages: systemd (systemd-analyze; the container need not run
  # it), man-db (man, which systemd-analyze verify uses for Documentation=),
  # dpkg-dev (dpkg-shlibdeps, for the package's Depends), lintian (Debian's
  # own package checks), mandoc (its man page lint).
  local need=() entry
  for entry in systemd:systemd-analyze man-db:man dpkg-dev:dpkg-shlibdeps lintian:lintian mandoc:mandoc; do
    command -v "${entry#*:}" >/dev/null || need+=("${entry%%:*}")
  done
  if [ ${#need[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] || die "missing ${need[*]}: apt-get install ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
  local tools="$target/tools"
  [ "$("$tools/bin/cargo-deb" --version 2>/dev/null)" = "cargo-deb $CARGO_DEB_VERSION" ] ||
    cargo install --quiet --locked cargo-deb --version "$CARGO_DEB_VERSION" --root "$tools"
  # The binary the tests built (dev profile): the check is of the packaging,
  # and a release build would double CI's compile time. A release is
  # `cargo deb -p keysmith-cli` (release profile). cargo-deb strips the
  # copy it packages, as a release would (lintian refuses an unstripped
  # binary); the test binary itself is left as it is.
  local profile_dir="$target/debug"
  [ "$(realpath "$KEYSMITH_BIN")" = "$(realpath "$profile_dir/keysmith")" ] ||
    die "the Debian package takes the binary from $profile_dir; KEYSMITH_BIN is $KEYSMITH_BIN"
  bash packaging/debian/gen-assets.sh "$KEYSMITH_BIN" "$profile_dir/pkg-assets"
  rm -rf "$work/deb"
  "$tools/bin/cargo-deb" -p keysmith-cli --profile dev --no-build --fast -q -o "$work/deb/"
  local deb
  deb=$(ls "$work"/deb/keysmith_*.deb)
  dpkg-deb --info "$deb" | sed -n '/Package:/,/Description:/p'
  # Debian's checks: no error (warnings and notes are printed; a package
  # not uploaded to Debian closes no ITP bug, so that warning is left out).
  lintian --fail-on error --tag-display-limit 0 --suppress-tags initial-upload-closes-no-bugs "$deb" || die "lintian found errors in $deb"
  local page
  for page in "$profile_dir"/pkg-assets/man/*.1.gz; do
    zcat "$page" | mandoc -T lint -W warning ||
      die "mandoc -T lint warns on $(basename "$page"): zcat $page | mandoc -T lint -W warning"
  done
  rm -rf "$work/unit"
  dpkg-deb -x "$deb" "$work/unit"
  local unit="$work/unit/usr/lib/systemd/system/keysmith.service"
  for setting in DynamicUser=yes StateDirectory=keysmith ProtectSystem=strict NoNewPrivileges=yes \
    PrivateTmp=yes ProtectHome=yes 'CapabilityBoundingSet=' 'RestrictAddressFamilies=' \
    'SystemCallFilter=@system-service'; do
    grep -q "^$setting" "$unit" || die "the unit lacks $setting"
  done
  grep -q '^ExecStart=[^#]*--\(token\|secret\|lease-secret\|shard-key-secret\)\b' "$unit" &&
    die "the unit puts a secret on the command line"

  [ "$(id -u)" = 0 ] || die "dpkg -i needs root"
  if dpkg -s keysmith >/dev/null 2>&1; then die "a keysmith package is installed already; not touching it"; fi
  dpkg -i "$deb"
  trap 'dpkg --purge keysmith >/dev/null || true; cleanup' EXIT
  /usr/bin/keysmith --version
  # With the unit's binary and man page installed, verify checks them too.
  systemd-analyze verify /usr/lib/systemd/system/keysmith.service
  for f in /usr/share/bash-completion/completions/keysmith /usr/share/zsh/vendor-completions/_keysmith \
    /usr/share/fish/vendor_completions.d/keysmith.fish /usr/share/man/man1/keysmith.1.gz \
    /usr/share/man/man1/keysmith-serve.1.gz /etc/keysmith/keysmith.toml; do
    [ -s "$f" ] || die "not installed: $f"
  done
  grep -q '^/etc/keysmith/keysmith.toml$' /var/lib/dpkg/info/keysmith.conffiles ||
    die "/etc/keysmith/keysmith.toml is not a conffile"
  man -w keysmith-serve >/dev/null
  bash -c 'source /usr/share/bash-completion/completions/keysmith && complete -p keysmith' >/dev/null
  # The shipped configuration parses (the command line wins over it: a
  # scratch store and port, so nothing is written to /var/lib/keysmith).
  timeout 20 /usr/bin/keysmith serve --config /etc/keysmith/keysmith.toml --listen 127.0.0.1:0 \
    --store "sqlite://$work/deb.db" --counter-dir "$work/deb-counters" >"$work/deb-serve.log" 2>&1 &
  local pid=$! ok=
  for _ in $(seq 200); do
    grep -q 'listening on' "$work/deb-serve.log" && { ok=1; break; }
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  [ -n "$ok" ] || die "the installed keysmith did not serve with the shipped config: $(cat "$work/deb-serve.log")"
  dpkg --purge keysmith >/dev/null
  [ ! -e /usr/bin/keysmith ] || die "dpkg --purge left /usr/bin/keysmith"
  trap cleanup EXIT
}

timed crates crates
timed server start_server
timed python python_packages
timed npm npm_package
timed debian debian_package
total=0
for part in crates server python npm debian; do total=$((total + took[$part])); done
printf '\npackages: all built and installed; seconds: crates %s, server %s, python %s, npm %s, debian %s; total %s\n' \
  "${took[crates]}" "${took[server]}" "${took[python]}" "${took[npm]}" "${took[debian]}" "$total"
