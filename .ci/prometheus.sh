#!/usr/bin/env bash
# The alerting rules (packaging/prometheus): promtool checks them, runs their
# unit tests, and this script checks that every alert has a unit test and that
# every runbook link names a heading of the guide's "Monitoring and alerts"
# page. A few seconds (5 s on a busy 2-core machine). The rules and the
# dashboard's queries are evaluated against a live server and Prometheus by
# crates/keysmith-cli/tests/prometheus_queries.rs (cargo test).
set -euo pipefail
cd "$(dirname "$0")/.."

command -v promtool >/dev/null 2>&1 || { echo "prometheus: promtool not found: apt-get install prometheus" >&2; exit 1; }
rules=packaging/prometheus/keysmith-rules.yml
tests=packaging/prometheus/keysmith-rules.test.yml
guide=docs/book/src/operations/monitoring.md

promtool check rules "$rules"
promtool test rules "$tests"

fail=0
alerts="$(sed -n 's/^ *- alert: *//p' "$rules" | sort -u)"
[ -n "$alerts" ] || { echo "prometheus: no alert found in $rules" >&2; exit 1; }
tested="$(sed -n 's/^ *alertname: *//p' "$tests" | sort -u)"
for a in $alerts; do
  if ! grep -qx "$a" <<<"$tested"; then
    echo "prometheus: alert $a has no unit test in $tests" >&2
    fail=1
  fi
  anchor="$(tr '[:upper:]' '[:lower:]' <<<"$a")"
  grep -q "monitoring.md#$anchor\"" "$rules" || { echo "prometheus: alert $a has no runbook_url to monitoring.md#$anchor" >&2; fail=1; }
  # mdbook and GitHub make the anchor of "### KeysmithXyz" "keysmithxyz".
  grep -qx "### $a" "$guide" || { echo "prometheus: $guide has no heading '### $a' (the runbook of alert $a)" >&2; fail=1; }
done
exit "$fail"
