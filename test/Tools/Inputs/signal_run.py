#!/usr/bin/env python3
"""Starts `pipe-run OUT --data D --steps <many> --log L` (several ranks under
mpirun), waits until the ranks log steps, sends SIGNAL to pipe-run alone
(not its process group: as `kill PID` or a supervisor would) and prints its
exit status, how many processes running OUT's executables are left a few
seconds later, and whether the log still grows.

    signal_run.py OUT D.npz LOG TERM|INT
"""
import os
import shutil
import signal
import subprocess
import sys
import time

out, data, log, name = sys.argv[1:5]
out = os.path.abspath(out)
run = subprocess.Popen([shutil.which("pipe-run"), out, "--data", data, "--steps", "100000000",
                        "--quiet", "--log", log], stdin=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, start_new_session=True)


def lines():
    try:
        with open(log) as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


deadline = time.time() + 120
while lines() < 3 and time.time() < deadline and run.poll() is None:
    time.sleep(0.2)
run.send_signal(getattr(signal, "SIG" + name))
try:
    rc = run.wait(timeout=60)
except subprocess.TimeoutExpired:
    rc = "still running"
print("pipe-run exit", rc)
time.sleep(3)


def left():
    n = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if (out + "/device").encode() in f.read():
                    n += 1
        except OSError:
            pass
    return n


before = lines()
time.sleep(2)
print("processes left", left(), "log grows", lines() > before)
for pid in os.listdir("/proc"):  # (a failure here leaves nothing behind)
    if pid.isdigit():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if (out + "/device").encode() in f.read():
                    os.kill(int(pid), signal.SIGKILL)
        except OSError:
            pass
