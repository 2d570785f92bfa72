#!/usr/bin/env bash
# Values/s of the Java client beside a bare AtomicLong loop, in one run (see Bench.java).
# Usage: KEYSMITH_BIN=/path/to/keysmith ./bench.sh [SECONDS_PER_ROW]
set -euo pipefail
cd "$(dirname "$0")"
mvn -B -q test-compile
cp=target/classes:target/test-classes:$(printf '%s:' /usr/share/java/jackson-databind.jar \
  /usr/share/java/jackson-core.jar /usr/share/java/jackson-annotations.jar)
exec java -cp "$cp" dev.keysmith.client.Bench "$@"
