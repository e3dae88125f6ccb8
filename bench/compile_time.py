#!/usr/bin/python3
"""How long pipe-compile takes as the model and the micro-batch count grow.

    /usr/bin/python3 bench/compile_time.py [--build build] [--layers 12,48,128]
        [--microbatches 4,8,64] [--stages 12=4,48=8,128=8 | --stages 8]
        [--batch B] [--schedule 1f1b] [--partition balanced] [--repeats N]
        [--timeout 600] [--work DIR]

For each layer count, builds the decoder-only transformer of examples/models.py
(models.Decoder: vocabulary 32, width 32, 4 heads, 8 tokens) with that many
blocks, exports it to ONNX with its cross-entropy loss and a symbolic batch
axis (cached in --work, default build/bench-compile-time/decoder_L<layers>.onnx)
and counts its ONNX nodes. Then, one run at a time, times the whole
`pipe-compile MODEL -o OUT --stages S --microbatches M --schedule 1f1b
--batch B` process (wall clock, best of --repeats; default 3 below 48 layers,
1 from 48 layers up), for every M. S defaults to 4 below 48 layers and 8
from 48 up (never more than the layer count); B defaults to the least
multiple of every M that is at least 64 (64 for M = 4, 8, 64), so that every
M splits the same mini-batch; a row whose M does not divide --batch uses
2*M. A compile that fails or runs past --timeout is shown as such in the
table; the benchmark goes on.

Prints per run the seconds, the seconds per 1000 ONNX nodes, the peak
resident memory of pipe-compile and the executables it linked; per model the
ratio t(M=largest)/t(M=smallest), i.e. t(M=64)/t(M=4) by default, next to
the targets: M=64 within 1.2x of M=4, and <= 30 s for ~10,000 nodes (the
128-layer model has ~11,400) into 8 executables. The machine's load average
is printed before and after: other processes (builds) distort the numbers.
Not a test.
"""
import argparse
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))

TARGET_RATIO = 1.2
TARGET_SECONDS = 30.0
TARGET_NODES = 10000
TARGET_STAGES = 8


def ints(text):
    return [int(v) for v in text.split(",") if v.strip()]


def stage_count(spec, layers):
    """--stages is a number for every model or a list LAYERS=S,..."""
    if spec:
        if "=" not in spec:
            return int(spec)
        for item in spec.split(","):
            key, _, value = item.partition("=")
            if int(key) == layers:
                return int(value)
    return min(4 if layers < 48 else 8, max(layers, 1))


def export(layers, work):
    """The cached decoder with `layers` blocks; returns (path, ONNX nodes)."""
    import onnx
    path = os.path.join(work, f"decoder_L{layers}.onnx")
    if not os.path.exists(path):
        import torch
        import models
        torch.manual_seed(0)
        model = models.Decoder(layers=layers)
        model.train()
        tokens = torch.randint(0, 32, (2, 9))
        args = (tokens[:, :8].contiguous(), tokens[:, 1:].contiguous())
        names = ["tokens", "targets"]
        tmp = path + f".{os.getpid()}.tmp"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, args, tmp, input_names=names,
                              output_names=["loss"], opset_version=17,
                              dynamic_axes={n: {0: "batch"} for n in names},
                              do_constant_folding=False,
                              training=torch.onnx.TrainingMode.TRAINING)
        os.replace(tmp, path)
    return path, len(onnx.load(path).graph.node)


def compile_once(cmd, timeout, log):
    """Runs cmd in its own process group; returns (status, seconds, peak RSS
    in MiB). status: 0 ok, 'timeout', or the exit code / signal."""
    with open(log, "wb") as out:
        begin = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        result = {}

        def reap():
            # wait4 rather than Popen.wait: it also gives pipe-compile's rusage.
            _, status, usage = os.wait4(proc.pid, 0)
            result["seconds"] = time.perf_counter() - begin
            result["status"] = status
            result["rss"] = usage.ru_maxrss / 1024.0
        waiter = threading.Thread(target=reap, daemon=True)
        waiter.start()
        waiter.join(timeout)
        timed_out = waiter.is_alive()
        if timed_out:
            try:
                os.killpg(proc.pid, 9)  # the linker children too
            except ProcessLookupError:
                pass
            waiter.join()
        proc.returncode = 0  # reaped above; keep Popen from waiting again
    if timed_out:
        return "timeout", result["seconds"], result["rss"]
    status = result["status"]
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)
    return code, result["seconds"], result["rss"]


def last_line(log):
    try:
        with open(log, errors="replace") as f:
            lines = [l.strip() for l in f if l.strip()]
    except OSError:
        return ""
    for line in reversed(lines):
        if "error" in line.lower():
            return line
    return lines[-1] if lines else ""


def measure(a, pipe_compile, model, layers, nodes, stages, m, work):
    batch = a.batch if a.batch and a.batch % m == 0 else (2 * m if a.batch else a.default_batch)
    repeats = a.repeats or (3 if layers < 48 else 1)
    row = {"layers": layers, "nodes": nodes, "stages": stages, "m": m,
           "batch": batch, "seconds": None, "error": None, "rss": None, "exes": None}
    for r in range(repeats):
        out = tempfile.mkdtemp(prefix=f"L{layers}_M{m}.", dir=work)
        cmd = [pipe_compile, model, "-o", out, "--stages", str(stages),
               "--microbatches", str(m), "--schedule", a.schedule,
               "--batch", str(batch), "--partition", a.partition]
        log = os.path.join(work, f"L{layers}_M{m}.log")
        print(f"  layers {layers} M {m} run {r + 1}/{repeats}: {' '.join(cmd[1:])}",
              file=sys.stderr, flush=True)
        status, seconds, rss = compile_once(cmd, a.timeout, log)
        exes = len([f for f in os.listdir(out) if f.startswith("device")]) \
            if os.path.isdir(out) else 0
        shutil.rmtree(out, ignore_errors=True)
        if status == "timeout":
            row["error"] = f"TIMEOUT > {a.timeout:g} s"
            break
        if status != 0:
            why = last_line(log).replace(f"pipe-compile: error: {model}: ", "")
            row["error"] = f"FAILED (exit {status}): {why[:120]}"
            break
        if row["seconds"] is None or seconds < row["seconds"]:
            row["seconds"], row["rss"], row["exes"] = seconds, rss, exes
        print(f"    {seconds:.2f} s", file=sys.stderr, flush=True)
    return row


def loadavg():
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "?"


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--layers", default="12,48,128", help="decoder blocks, e.g. 12,48,128")
    p.add_argument("--microbatches", default="4,8,64", help="M values, e.g. 4,8,64")
    p.add_argument("--stages", default="",
                   help="S for every model, or LAYERS=S,... (default 4 below 48 layers, else 8)")
    p.add_argument("--batch", type=int, default=0,
                   help="mini-batch (default: least multiple of every M >= 64)")
    p.add_argument("--schedule", default="1f1b")
    p.add_argument("--partition", default="balanced")
    p.add_argument("--repeats", type=int, default=0,
                   help="best of N (default 3 below 48 layers, 1 from 48 up)")
    p.add_argument("--timeout", type=float, default=600, help="seconds per compile")
    p.add_argument("--work", default="",
                   help="model cache and scratch (default BUILD/bench-compile-time)")
    a = p.parse_args()

    layer_counts, ms = ints(a.layers), ints(a.microbatches)
    lcm = 1
    for m in ms:
        lcm = lcm * m // math.gcd(lcm, m)
    a.default_batch = lcm * max(1, -(-64 // lcm))
    pipe_compile = os.path.join(a.build, "bin", "pipe-compile")
    if not os.access(pipe_compile, os.X_OK):
        sys.exit(f"compile_time.py: no {pipe_compile}; build it first (ninja -C {a.build})")
    work = a.work or os.path.join(a.build, "bench-compile-time")
    os.makedirs(work, exist_ok=True)

    print(f"pipe-compile: {pipe_compile}", flush=True)
    print(f"cores: {os.cpu_count()}, load average before: {loadavg()}", flush=True)
    rows = []
    for layers in layer_counts:
        print(f"exporting the {layers}-layer decoder ...", file=sys.stderr, flush=True)
        model, nodes = export(layers, work)
        stages = stage_count(a.stages, layers)
        for m in ms:
            rows.append(measure(a, pipe_compile, model, layers, nodes, stages, m, work))

    print()
    head = f"{'layers':>6} {'nodes':>6} {'stages':>6} {'batch':>5} {'M':>4} " \
           f"{'seconds':>8} {'s/1k nodes':>10} {'peak MiB':>8} {'exes':>4}"
    print(head)
    print("-" * len(head))
    for r in rows:
        lead = f"{r['layers']:>6} {r['nodes']:>6} {r['stages']:>6} {r['batch']:>5} {r['m']:>4} "
        if r["error"]:
            print(lead + r["error"])
        else:
            per_k = r["seconds"] / r["nodes"] * 1000
            print(lead + f"{r['seconds']:>8.2f} {per_k:>10.3f} {r['rss']:>8.0f} {r['exes']:>4}")
    print()
    lo, hi = min(ms), max(ms)
    for layers in layer_counts:
        mine = {r["m"]: r for r in rows if r["layers"] == layers}
        t_lo, t_hi = mine[lo]["seconds"], mine[hi]["seconds"]
        nodes = mine[lo]["nodes"]
        ratio = f"{t_hi / t_lo:.2f}" if t_lo and t_hi else "n/a"
        verdict = ""
        if t_lo and t_hi and hi > lo:
            verdict = " (ok)" if t_hi / t_lo <= TARGET_RATIO else f" (target <= {TARGET_RATIO})"
        ok = [r["seconds"] for r in mine.values() if r["seconds"]]
        worst = f"{max(ok):.2f} s, {max(ok) / nodes * 1000:.3f} s/1k nodes" if ok else "n/a"
        scaling = f"t(M={hi})/t(M={lo}) = {ratio}{verdict}; " if hi > lo else ""
        print(f"{layers:>4} layers ({nodes} nodes, {mine[lo]['stages']} stages): "
              f"{scaling}slowest {worst}")
    print(f"load average after: {loadavg()}")
    print(f"targets: M=64 within {TARGET_RATIO}x of M=4; <= {TARGET_SECONDS:g} s for "
          f"~{TARGET_NODES:,} nodes into {TARGET_STAGES} executables")


if __name__ == "__main__":
    main()
