#!/usr/bin/env python3
"""Imports every ONNX backend test model (Debian's libonnx-testdata) whose
operators are all supported by pipec, and reports how many were attempted
and how many imported and verified. A model is attempted when every node's
operator is one pipe-translate lists and every tensor element type is one
pipec models (no strings, complex or 8-bit floats); none attempted may fail.

usage: import_testdata.py PIPE_TRANSLATE DATA_DIR [SUBDIR ...]
"""
import concurrent.futures as cf
import os
import subprocess
import sys

import onnx

SUPPORTED_TYPES = {1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 16}

# Models whose tensor shapes depend on a graph input's value, which a program
# of static shapes cannot take (the import refuses them naming the op): the
# window functions' expansions, whose length is their input x.
VALUE_SHAPED = {f"test_{w}window{s}_expanded" for w in ("blackman", "hamming", "hann")
                for s in ("", "_symmetric")}
# Loops and sequences whose trip count or split sizes are a graph input's
# value (Range's expansion loops over (limit - start) / delta), which the
# importer cannot unroll (it refuses them naming the Loop).
VALUE_SHAPED |= {"test_loop11", "test_range_float_type_positive_delta_expanded",
                 "test_range_int32_type_negative_delta_expanded", "test_sequence_model8"}
# OneHot whose depth is a graph input (the output's extent is its value).
VALUE_SHAPED |= {f"test_onehot_{s}" for s in ("negative_indices", "with_axis",
                                              "with_negative_axis", "without_axis")}


def tensor_types(model):
    g = model.graph
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.HasField("tensor_type"):
            yield vi.type.tensor_type.elem_type
        else:
            yield -1
    for t in g.initializer:
        yield t.data_type
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                yield a.t.data_type
            if a.name == "to":
                yield a.i


def classify(path, ops):
    if os.path.basename(os.path.dirname(path)) in VALUE_SHAPED:
        return "skip", "shapes depend on an input's value"
    try:
        m = onnx.load(path, load_external_data=False)
    except Exception as e:  # unreadable by onnx itself: not ours to judge
        return "skip", f"onnx cannot load it: {e}"
    for n in m.graph.node:
        if n.domain not in ("", "ai.onnx", "ai.onnx.preview.training"):
            return "skip", f"domain {n.domain}"
        if n.op_type not in ops:
            return "skip", f"operator {n.op_type}"
    for t in tensor_types(m):
        if t not in SUPPORTED_TYPES:
            return "skip", f"element type {t}"
    return "attempt", ""


def run(translate, path):
    p = subprocess.run([translate, "--import-onnx", path, "-o", os.devnull],
                       capture_output=True, text=True, timeout=120)
    return p.returncode, (p.stderr.strip().splitlines() or [""])[0]


def main():
    translate, data = sys.argv[1], sys.argv[2]
    subdirs = sys.argv[3:] or ["node", "pytorch-converted", "pytorch-operator",
                               "simple"]
    ops = set(subprocess.run([translate, "--list-onnx-operators"], check=True,
                             capture_output=True, text=True).stdout.split())
    models = []
    for sub in subdirs:
        root = os.path.join(data, sub)
        if not os.path.isdir(root):
            continue
        for case in sorted(os.listdir(root)):
            path = os.path.join(root, case, "model.onnx")
            if os.path.exists(path):
                models.append((f"{sub}/{case}", path))
    attempted, skipped = [], 0
    for name, path in models:
        kind, _ = classify(path, ops)
        if kind == "attempt":
            attempted.append((name, path))
        else:
            skipped += 1
    failures = []
    with cf.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        futures = {pool.submit(run, translate, p): n for n, p in attempted}
        for f in cf.as_completed(futures):
            rc, msg = f.result()
            if rc != 0:
                failures.append((futures[f], msg))
    for name, msg in sorted(failures):
        print(f"FAIL {name}: {msg}")
    print(f"onnx-testdata import: {len(models)} models, {skipped} not "
          f"attempted (unsupported operator or type, or shapes from input values), {len(attempted)} "
          f"attempted, {len(attempted) - len(failures)} passed, "
          f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
