-- Sends one request over and over at a steady rate across all connections (open loop, as
-- far as the connections allow): a flood of deliveries with a bad signature.
-- Usage: wrk -s flood.lua URL -- <requests per second> <threads> <Stripe-Signature> <body>
-- Each thread takes its share of the rate; each response is followed by a wait until
-- the thread's next slot (rate / threads per second, from the thread's start), so a slow
-- answer does not lower the rate while a connection is free. At the end it prints one
-- line: BENCH {json}, as replay.lua does (report.lua).

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local report = dofile(here .. "report.lua")
local ffi = require("ffi")
ffi.cdef [[
  typedef struct { long tv_sec; long tv_nsec; } hooklatch_timespec;
  int clock_gettime(int clock, hooklatch_timespec *now);
]]
local CLOCK_MONOTONIC = 1
local clock = ffi.new("hooklatch_timespec")

local function now_ms()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, clock)
  return tonumber(clock.tv_sec) * 1000 + tonumber(clock.tv_nsec) / 1e6
end

local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  local rate, nthreads = tonumber(args[1]), tonumber(args[2])
  gap_ms = 1000 * nthreads / rate
  req = wrk.format("POST", nil, {
    ["Content-Type"] = "application/json",
    ["Stripe-Signature"] = args[3],
  }, args[4])
  next_at = nil
end

function request()
  return req
end

function delay()
  local now = now_ms()
  next_at = (next_at or now) + gap_ms
  local wait = next_at - now
  if wait < 1 then
    return 0
  end
  return math.floor(wait)
end

function done(summary, latency, requests)
  report(summary, latency, 0)
end
