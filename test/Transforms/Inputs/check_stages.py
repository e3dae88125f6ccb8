#!/usr/bin/env python3
"""Checks a pipe-assign-stages result, independently of the pass.

    check_stages.py --stages N [--func forward] FILE.mlir   (or - for stdin)

Reads the printed IR (custom form) and checks, for the function:
  - every op of the body carries pipe.stage in [0, N);
  - along every def-use edge the stage does not decrease, except in a
    training step (a function with pipe.update/pipe.grad results) between
    two backward ops (those that the loss does not depend on but that read a
    forward value, directly or not), where it does not increase;
  - in a training step, an op whose result is a pipe.update result and that
    reads a parameter is in that parameter's stage;
  - every stage holds at least one op that is not a constant;
  - every pipe.param argument has pipe.stage = the earliest stage that uses
    it, and pipe.tied_stages = the stages using it when there are several;
  - the function has pipe.stage_costs with N entries and pipe.num_stages = N.
Prints one line "OK <N> stages: ops per stage [..]; tied [..]" or the
problems found (exit status 1).
"""
import argparse
import re
import sys

STAGE = re.compile(r"pipe\.stage = (\d+) : i64")
VALUE = re.compile(r"%[A-Za-z0-9_$.-]+(?:#\d+)?")


def split_args(header):
    """The argument list of a func.func line, split at top-level commas."""
    start = header.index("(")
    depth, args, cur = 0, [], ""
    for ch in header[start + 1:]:
        if ch in "(<[{":
            depth += 1
        elif ch in ")>]}":
            if depth == 0:
                break
            depth -= 1
        if ch == "," and depth == 0:
            args.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        args.append(cur)
    return [a.strip() for a in args]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stages", type=int, required=True)
    ap.add_argument("--func", default="forward")
    ap.add_argument("file")
    a = ap.parse_args()
    text = (sys.stdin if a.file == "-" else open(a.file)).read()
    lines = text.split("\n")
    problems = []

    header_at = next((i for i, l in enumerate(lines)
                      if re.match(r"\s*func\.func (\w+ )?@%s\(" % re.escape(a.func), l)),
                     None)
    if header_at is None:
        print(f"no func.func @{a.func}")
        return 1
    header = lines[header_at]

    params = {}  # %argN -> (name, stage, tied)
    for arg in split_args(header):
        m = re.match(r"(%arg\d+):", arg)
        if not m or "pipe.param" not in arg:
            continue
        stage = STAGE.search(arg)
        tied = re.search(r"pipe\.tied_stages = \[([^\]]*)\]", arg)
        tied_list = ([int(x.split(":")[0]) for x in tied.group(1).split(",")]
                     if tied else None)
        params[m.group(1)] = (re.search(r'pipe\.param = "([^"]*)"', arg).group(1),
                              int(stage.group(1)) if stage else None, tied_list)

    attrs = header[header.rfind("attributes {"):] if "attributes {" in header else ""
    costs = re.search(r"pipe\.stage_costs = \[([^\]]*)\]", attrs)
    if not costs or len(costs.group(1).split(",")) != a.stages:
        problems.append(f"pipe.stage_costs missing or not {a.stages} entries")
    num = re.search(r"pipe\.num_stages = (\d+) : i64", attrs)
    if not num or int(num.group(1)) != a.stages:
        problems.append(f"pipe.num_stages is not {a.stages}")

    results_sig = header[header.index(") -> ") + 5:] if ") -> " in header else ""
    result_attrs = []  # per function result: its attribute text
    depth, cur = 0, ""
    for ch in results_sig.lstrip("(").split(" attributes {")[0]:
        if ch in "<[{(":
            depth += 1
        elif ch in ">]})":
            depth -= 1
            if depth < 0:
                break
        if ch == "," and depth == 0:
            result_attrs.append(cur)
            cur = ""
        else:
            cur += ch
    result_attrs.append(cur)
    training = any("pipe.update" in r or "pipe.grad" in r for r in result_attrs)

    stage_of = {}          # value name -> stage of its defining op
    op_list = []           # (results, operands, stage, text)
    users = {}             # param -> set of stages using it
    per_stage = [0] * a.stages
    ops = 0
    for line in lines[header_at + 1:]:
        if re.match(r"\s*}\s*$", line):  # the function's end
            break
        body = line.strip()
        if not body or body.startswith("^") or body.startswith("//"):
            continue
        ops += 1
        m = STAGE.search(body)
        if not m:
            problems.append(f"no pipe.stage: {body[:80]}")
            continue
        stage = int(m.group(1))
        if not 0 <= stage < a.stages:
            problems.append(f"stage {stage} out of range: {body[:80]}")
        m = re.match(r"(%[^ ,=]+(?:, %[^ ,=]+)*) = (.*)", body)
        lhs, rhs = (m.group(1), m.group(2)) if m else ("", body)
        operands = [o.split("#")[0] for o in VALUE.findall(rhs)]
        results = []
        for result in VALUE.findall(lhs):
            results.append(result.split(":")[0])
            stage_of[result.split(":")[0]] = stage
        op_list.append((results, operands, stage, body))
        for base in operands:
            if base in params:
                users.setdefault(base, set()).add(stage)
        if "onnx.Constant" not in body and "onnx.NoValue" not in body \
                and not body.startswith("return") and 0 <= stage < a.stages:
            per_stage[stage] += 1

    # Forward: what the loss depends on; backward: the rest that reads a
    # forward value (directly or through other backward ops).
    defined_by = {r: i for i, (rs, _, _, _) in enumerate(op_list) for r in rs}
    forward, backward = set(), set()
    ret = next((o for o in op_list if o[3].startswith("return")), None)
    if training:
        loss = [i for i, r in enumerate(result_attrs) if "pipe.loss" in r]
        if not loss or ret is None:
            problems.append("training step without a pipe.loss result")
        else:
            work = [defined_by[ret[1][loss[0]]]]
            while work:
                i = work.pop()
                if i in forward:
                    continue
                forward.add(i)
                work += [defined_by[o] for o in op_list[i][1] if o in defined_by]
            for i, (_, operands, _, text) in enumerate(op_list):
                if i not in forward and not text.startswith("return") and any(
                        defined_by.get(o) in forward or defined_by.get(o) in backward
                        for o in operands):
                    backward.add(i)
    for i, (results, operands, stage, text) in enumerate(op_list):
        if text.startswith("return"):
            continue
        for o in operands:
            d = defined_by.get(o)
            if d is None:
                continue
            if d in backward and i in backward:
                if op_list[d][2] < stage:
                    problems.append(f"gradient {o} flows from stage {op_list[d][2]} "
                                    f"up to stage {stage}: {text[:80]}")
            elif op_list[d][2] > stage:
                problems.append(f"{o} flows from stage {op_list[d][2]} back "
                                f"to stage {stage}: {text[:80]}")
    if training and ret is not None:
        for k, value in enumerate(ret[1]):
            if k >= len(result_attrs) or "pipe.update" not in result_attrs[k]:
                continue
            d = defined_by.get(value)
            if d is None:
                continue
            for o in op_list[d][1]:
                if o in params and params[o][1] != op_list[d][2]:
                    problems.append(f"update of {params[o][0]} in stage "
                                    f"{op_list[d][2]}, its owner is {params[o][1]}")
    if training:
        print(f"training step: {len(forward)} forward, {len(backward)} backward ops")

    for s, count in enumerate(per_stage):
        if count == 0:
            problems.append(f"stage {s} has no op")
    tied_report = []
    for arg, (name, stage, tied) in params.items():
        used = sorted(users.get(arg, {0}))
        if stage != used[0]:
            problems.append(f"param {name}: pipe.stage {stage}, first used in {used[0]}")
        if len(used) > 1:
            tied_report.append(f"{name}:{used}")
            if tied != used:
                problems.append(f"param {name}: pipe.tied_stages {tied}, used in {used}")
        elif tied is not None:
            problems.append(f"param {name}: pipe.tied_stages {tied} but used only in {used}")

    if problems:
        print("\n".join(problems))
        return 1
    print(f"OK {a.stages} stages: ops per stage {per_stage}; tied [{', '.join(tied_report)}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
