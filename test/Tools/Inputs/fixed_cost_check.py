"""For test/Tools/pipe-auto.test: the step time pipe-compile predicts for a
few plans with two profiles (the same ops; the second's whole steps have a
fixed cost per step more) and the difference per plan, which is the fixed
cost where the planner charges it once per step.

    fixed_cost_check.py MODEL.onnx BASE.json FIXED.json WORKDIR
"""
import json
import os
import subprocess
import sys

model, base, fixed, work = sys.argv[1:5]
os.makedirs(work, exist_ok=True)


def predicted(profile, stages, m, schedule, name):
    out = os.path.join(work, name)
    subprocess.run(["pipe-compile", model, "--batch", "8", "-o", out, "--stages",
                    str(stages), "--microbatches", str(m), "--schedule", schedule,
                    "--profile", profile], check=True, capture_output=True)
    return json.load(open(os.path.join(out, "plan.json")))["prediction"]["step_s"]


for stages, m, schedule in [(1, 1, "1f1b"), (2, 1, "gpipe"), (2, 8, "1f1b"),
                            (4, 8, "gpipe")]:
    key = f"p{stages}-m{m}-{schedule}"
    a = predicted(base, stages, m, schedule, key + "-base")
    b = predicted(fixed, stages, m, schedule, key + "-fixed")
    print(f"p={stages} M={m} {schedule}: +{(b - a) * 1e3:.3f} ms")
