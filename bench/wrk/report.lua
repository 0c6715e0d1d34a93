-- The line flood.lua and replay.lua end a run with: BENCH {json}, wrk's summary and
-- latency in microseconds, and "wrapped", the passes past the end of the requests (replay.lua's;
-- 0 for a script that sends one request over and over).
-- Usage, from a script in this folder: local report = dofile(here .. "report.lua")

return function(summary, latency, wrapped)
  local e = summary.errors
  io.write(string.format(
    'BENCH {"requests": %d, "duration_us": %d, "status_errors": %d, "socket_errors": %d, ' ..
    '"p50_us": %d, "p90_us": %d, "p99_us": %d, "max_us": %d, "mean_us": %.1f, "wrapped": %d}\n',
    summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    latency.mean, wrapped))
end
