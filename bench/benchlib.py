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
