-- Sends pre-signed requests from a file, one per line: <path> TAB <Stripe-Signature> TAB <body>.
-- Usage: wrk -s replay.lua URL -- <file> <threads>
-- Each wrk thread takes every n-th line, so no two threads send the same request.
-- At the end it prints one line: BENCH {json} (report.lua). "wrapped" counts passes past
-- the end of the file (requests sent again, so no longer unique).

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local report = dofile(here .. "report.lua")

local threads = {}
local next_id = 0

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end

function init(args)
  local file, nthreads = args[1], tonumber(args[2])
  reqs = {}
  local i = 0
  for line in io.lines(file) do
    if i % nthreads == id then
      local path, signature, body = line:match("^([^\t]*)\t([^\t]*)\t(.*)$")
      reqs[#reqs + 1] = wrk.format("POST", path, {
        ["Content-Type"] = "application/json",
        ["Stripe-Signature"] = signature,
      }, body)
    end
    i = i + 1
  end
  position = 0
  wrapped = 0
end

function request()
  position = position + 1
  if position > #reqs then
    position = 1
    wrapped = wrapped + 1
  end
  return reqs[position]
end

function done(summary, latency, requests)
  local total_wrapped = 0
  for _, thread in ipairs(threads) do
    total_wrapped = total_wrapped + (thread:get("wrapped") or 0)
  end
  report(summary, latency, total_wrapped)
end
