#!/usr/bin/env bash
# The Java client's tests (clients/java) against real `keysmith serve` processes,
# and a throwaway PostgreSQL for the JDBC test: `mvn -B -q test`, then one summary
# line from Surefire's reports. Takes the binary from $KEYSMITH_BIN (else builds
# `cargo build -p keysmith-cli` and uses target/debug/keysmith).
#
# Offline: Maven resolves everything from Debian's packaged Maven repository
# (/usr/share/maven-repo; clients/java/.mvn/maven.config points it there), so it
# downloads nothing; the packages below put the artifacts there. Installs only what
# is missing, with apt, as root:
#   default-jdk-headless           javac and java (17)
#   maven                          mvn
#   junit5                         JUnit Jupiter 5.9 and the platform launcher
#   libjackson2-databind-java      the client's one dependency (Jackson 2.14)
#   libpostgresql-jdbc-java        the JDBC driver of the JDBC test
#   libmaven-compiler-plugin-java, libmaven-resources-plugin-java, libsurefire-java
#                                  the plugins `mvn test` runs (3.10.1, 3.3.0, 2.22.3)
#   postgresql                     initdb and pg_ctl for the JDBC test
#   openssl                        the TLS test's certificates (clients/tls-test-certs.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

repo=/usr/share/maven-repo
packages=(
  "default-jdk-headless:javac"
  "maven:mvn"
  "junit5:$repo/org/junit/jupiter/junit-jupiter-engine/5.9.2"
  "libjackson2-databind-java:$repo/com/fasterxml/jackson/core/jackson-databind/2.14.0"
  "libpostgresql-jdbc-java:$repo/org/postgresql/postgresql/42.5.5"
  "libmaven-compiler-plugin-java:$repo/org/apache/maven/plugins/maven-compiler-plugin/3.10.1"
  "libmaven-resources-plugin-java:$repo/org/apache/maven/plugins/maven-resources-plugin/3.3.0"
  "libsurefire-java:$repo/org/apache/maven/plugins/maven-surefire-plugin/2.22.3"
  "postgresql:/usr/lib/postgresql/*/bin/initdb"
  "openssl:openssl"
)
have() {
  case "$1" in
    /*) compgen -G "$1" >/dev/null ;;
    *) command -v "$1" >/dev/null 2>&1 ;;
  esac
}
need=()
for entry in "${packages[@]}"; do
  have "${entry#*:}" || need+=("${entry%%:*}")
done
if [ ${#need[@]} -gt 0 ]; then
  printf 'java client: installing %s\n' "${need[*]}"
  [ "$(id -u)" = 0 ] || { echo "missing ${need[*]}: run 'sudo apt-get install ${need[*]}'" >&2; exit 1; }
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # Debian's postgresql package would start a server of its own: not wanted.
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  rm -f /usr/sbin/policy-rc.d
fi
for entry in "${packages[@]}"; do
  have "${entry#*:}" || { echo "java client: still missing ${entry%%:*} (${entry#*:})" >&2; exit 1; }
done

if [ -z "${KEYSMITH_BIN:-}" ]; then
  cargo build -q -p keysmith-cli
  KEYSMITH_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/keysmith"
fi
KEYSMITH_BIN=$(realpath "$KEYSMITH_BIN")
export KEYSMITH_BIN

cd clients/java
rm -rf target/surefire-reports
status=0
mvn -B -q test || status=$?
# Surefire prints nothing under -q when all pass: one line from its reports.
python3 - <<'PY' || true
import glob, xml.etree.ElementTree as ET
t = f = s = 0
for p in glob.glob("target/surefire-reports/TEST-*.xml"):
    r = ET.parse(p).getroot()
    t += int(r.get("tests", 0)); s += int(r.get("skipped", 0))
    f += int(r.get("failures", 0)) + int(r.get("errors", 0))
print(f"java: {t - f - s} passed, {f} failed, {s} skipped")
PY
exit $status
