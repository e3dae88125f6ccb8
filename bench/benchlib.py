"""What the benchmark scripts share: running a tool (exit with its output
when it fails) and reading the step time from a pipe-run --log."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd):
    """Runs cmd; its stdout, or exits naming the command and its output."""
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return r.stdout


def step_time(log, skip=5):
    """Mean seconds per step after the first `skip` steps of a pipe-run
    --log, and the last step's loss."""
    rows = [json.loads(l) for l in open(log) if l.strip()]
    t = [r["time_s"] for r in rows]
    return (t[-1] - t[skip - 1]) / (len(t) - skip), rows[-1]["loss"]


def step_median(log, skip=5):
    """Median seconds per step after the first `skip` steps of a pipe-run
    --log (the median of the step-to-step differences: a burst of load on a
    shared machine moves a mean, not a median), and the last step's loss."""
    rows = [json.loads(l) for l in open(log) if l.strip()]
    t = [r["time_s"] for r in rows]
    d = sorted(t[i] - t[i - 1] for i in range(skip, len(t)))
    return d[len(d) // 2], rows[-1]["loss"]
