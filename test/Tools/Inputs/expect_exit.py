#!/usr/bin/env python3
"""expect_exit.py SECONDS COMMAND...: runs COMMAND (its output goes to ours)
and succeeds when it fails by itself within SECONDS, printing "ended with
exit code N within the time limit". A command that succeeds, or that is
still running after SECONDS (then killed, with its process group), fails
the check: for tests that a broken run ends, and ends quickly."""
import os
import signal
import subprocess
import sys

limit = float(sys.argv[1])
p = subprocess.Popen(sys.argv[2:], start_new_session=True)
try:
    rc = p.wait(timeout=limit)
except subprocess.TimeoutExpired:
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    print(f"FAIL: still running after {limit:g} s (killed)", flush=True)
    sys.exit(1)
if rc == 0:
    print("FAIL: the command succeeded", flush=True)
    sys.exit(1)
print(f"ended with exit code {rc} within the time limit", flush=True)
