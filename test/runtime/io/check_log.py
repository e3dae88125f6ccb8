"""Checks a JSON Lines step log written by log_test.cpp.

usage: check_log.py LOG FIRST_STEP LAST_STEP [RESUMED_AT]
Every line must be one JSON object with step, loss, samples_per_s, time_s and
the extra metric lr = 0.1 * step; steps consecutive; time_s non-decreasing
except at RESUMED_AT, where an appending run starts its clock again.
"""
import json
import math
import sys

path, first, last = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
resumed_at = int(sys.argv[4]) if len(sys.argv) > 4 else None
with open(path) as f:
    lines = f.read().splitlines()
records = [json.loads(line) for line in lines]
assert len(records) == last - first + 1, (len(records), first, last)
prev_time = -1.0
for i, rec in enumerate(records):
    step = first + i
    assert list(rec)[:4] == ["step", "loss", "samples_per_s", "time_s"], list(rec)
    assert rec["step"] == step, rec
    if step == 3:
        assert rec["loss"] is None, rec  # NaN is written as null
    else:
        assert math.isclose(rec["loss"], 1.0 / (step + 1), rel_tol=1e-9), rec
    assert math.isclose(rec["lr"], 0.1 * step, rel_tol=1e-9, abs_tol=1e-12), rec
    assert rec["grad \"norm\""] == 2.5, rec
    assert rec["samples_per_s"] > 0, rec
    if step == resumed_at:
        assert rec["time_s"] < prev_time, rec
    else:
        assert rec["time_s"] >= prev_time, rec
    prev_time = rec["time_s"]
print("log ok:", len(records), "records")
