-- wrk script for keysmith's HTTP benchmarks: sets the method from
-- $WRK_METHOD (default GET) and prints one RESULT line with requests per
-- second and latency percentiles (microseconds), p99.9 included.
wrk.method = os.getenv("WRK_METHOD") or "GET"

function done(summary, latency, requests)
  local secs = summary.duration / 1e6
  io.write(string.format(
    "RESULT requests=%d seconds=%.2f rps=%.0f non2xx=%d socket_errors=%d p50_us=%.0f p99_us=%.0f p999_us=%.0f max_us=%.0f\n",
    summary.requests, secs, summary.requests / secs,
    summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9), latency.max))
end
