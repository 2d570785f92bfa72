#!/usr/bin/env bash
# The Java client's benchmark (src/test/java/.../Bench.java) against a running server
# without a token:
#   clients/java/bench.sh --url URL --sequence NAME --seconds S --threads N [--max-block B]
# prints "<case>\t<per_second>" lines only on stdout (Maven's output goes to stderr).
set -euo pipefail
cd "$(dirname "$0")"
mvn -B -q test-compile >&2
cp=target/classes:target/test-classes:$(printf '%s:' /usr/share/java/jackson-databind.jar \
  /usr/share/java/jackson-core.jar /usr/share/java/jackson-annotations.jar)
exec java -cp "$cp" dev.keysmith.client.Bench "$@"
