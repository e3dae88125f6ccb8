"""Checks Chrome trace JSON written by pipert (trace_test.cpp, comm tests).

usage: check_trace.py FILE [--pids N] [--min-events N] [--cats a,b,...]
The file must be one JSON object with a traceEvents list; every complete
event has name, cat, ph "X", numeric ts >= 0 and dur >= 0, integer pid and
tid; with --pids, events come from pids 0..N-1, each named "device <pid>" by
a process_name metadata event; with --cats, each category occurs.
"""
import argparse
import json

ap = argparse.ArgumentParser()
ap.add_argument("file")
ap.add_argument("--pids", type=int)
ap.add_argument("--min-events", type=int, default=1)
ap.add_argument("--cats", default="")
a = ap.parse_args()

with open(a.file) as f:
    doc = json.load(f)
events = doc["traceEvents"]
complete = [e for e in events if e.get("ph") == "X"]
assert len(complete) >= a.min_events, (len(complete), a.min_events)
for e in complete:
    for key in ("name", "cat", "ts", "dur", "pid", "tid"):
        assert key in e, (key, e)
    assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
    assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0, e
    assert isinstance(e["pid"], int) and isinstance(e["tid"], int), e
names = {e["pid"]: e["args"]["name"] for e in events
         if e.get("ph") == "M" and e.get("name") == "process_name"}
if a.pids is not None:
    pids = {e["pid"] for e in complete}
    assert pids == set(range(a.pids)), pids
    for p in range(a.pids):
        assert names.get(p) == "device %d" % p, names
cats = {e["cat"] for e in complete}
for c in filter(None, a.cats.split(",")):
    assert c in cats, (c, cats)
print("trace ok:", len(complete), "events")
