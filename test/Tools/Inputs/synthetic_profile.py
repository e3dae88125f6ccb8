"""Rewrites a pipe-profile JSON (keeping its model hash and machine) into a
synthetic one whose optimum plan is known, for test/Tools/pipe-auto.test.

    synthetic_profile.py IN OUT constant|linear|fixed|cheapforward|machine

constant: every node costs 1 ms forward and backward at every size (pure
per-call cost: splitting a batch only multiplies calls), free links and
updates: no pipeline beats one device, so --auto must pick 1 stage.
linear: every node costs rows x 10 us (no per-call cost), free links and
updates: the bubble (p-1)/(M+p-1) is all that is lost, so the most stages
and the most micro-batches win (1F1B: GPipe's equal time with more memory).
fixed: linear's node times, and whole steps of 1 ms more than the nodes at
every size: a fixed cost per step (feeding inputs, the step loop) that
the planner must charge once per step, not once per micro-batch.
cheapforward: linear, but forwards cost rows x 1 us and backwards rows x
19 us: recomputing a forward in the backward (SpecTrain, PipeMare) costs
5% more per micro-batch, less than a synchronous flush.
machine: the same profile, measured "elsewhere".
"""
import json
import sys

src, dst, kind = sys.argv[1:4]
p = json.load(open(src))
rows = p["rows"]
if kind == "machine":
    p["machine"] = "another machine x 1"
else:
    for op in p["ops"].values():
        if kind == "constant":
            op["forward_s"] = [1e-3] * len(rows)
            op["backward_s"] = [1e-3] * len(rows)
        elif kind == "cheapforward":
            op["forward_s"] = [1e-6 * r for r in rows]
            op["backward_s"] = [1.9e-5 * r for r in rows]
        else:
            op["forward_s"] = [1e-5 * r for r in rows]
            op["backward_s"] = [1e-5 * r for r in rows]
    p["step_s"] = [0.0] * len(rows)
    if kind == "fixed":
        p["step_s"] = [1e-3 + sum(o["forward_s"][i] + o["backward_s"][i]
                                  for o in p["ops"].values())
                       for i in range(len(rows))]
    p["update_s"] = 0.0
    p["update_bytes_per_s"] = 1e30
    p["link"] = {"latency_s": 0.0, "bandwidth_bytes_per_s": 1e30}
json.dump(p, open(dst, "w"), indent=1)
