#!/usr/bin/env python3
"""pipert's sgemm next to numpy's on the same shapes, one thread each.

usage: bench/gemm.py [--bench build/bin/gemm_bench] [--threads 1] [MxNxK ...]

Runs gemm_bench --json twice, as pipert runs (oneDNN; OpenBLAS for tiny
products) and with PIPERT_GEMM=openblas, then numpy.matmul (float32) with the
same thread count, and prints GFLOP/s of the three and the ratios pipert /
numpy and pipert / pipert-on-OpenBLAS. Thread counts are fixed through the
environment before numpy loads its BLAS. OPENBLAS_CORETYPE is left as the
environment has it (see DESIGN.md).
"""
import argparse
import json
import os
import subprocess
import sys
import time


def blas_core_of_this_process():
    """OpenBLAS core type of the BLAS numpy loaded, via openblas_get_corename."""
    import ctypes
    with open("/proc/self/maps") as f:
        libs = sorted({line.split()[-1] for line in f if "blas" in line.split()[-1]})
    for lib in libs:
        try:
            fn = ctypes.CDLL(lib).openblas_get_corename
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_char_p
        return "%s (%s)" % (fn().decode(), os.path.basename(lib))
    return "not OpenBLAS (%s)" % ", ".join(libs)


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--bench", default=os.path.join(here, "..", "build", "bin", "gemm_bench"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--min-time", type=float, default=0.5)
    ap.add_argument("shapes", nargs="*")
    args = ap.parse_args()

    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    try:
        import numpy as np  # after the thread variables are set
    except ImportError:
        # The python3 on PATH may lack numpy; Debian's has it.
        if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") \
                and os.path.exists("/usr/bin/python3"):
            os.execv("/usr/bin/python3", ["/usr/bin/python3", os.path.abspath(__file__)] + sys.argv[1:])
        raise

    np.matmul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32))  # loads BLAS
    numpy_core = blas_core_of_this_process()

    cmd = [args.bench, "--json", "--threads", str(args.threads),
           "--min-time", str(args.min_time)] + args.shapes
    ours = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    blas = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True,
                                     env=dict(os.environ, PIPERT_GEMM="openblas")).stdout)

    print("pipert: OpenBLAS core %s, %d thread(s); numpy %s: %s"
          % (ours["openblas_core"], ours["threads"], np.__version__, numpy_core))
    print("%-18s %12s %14s %12s %9s %11s" % ("M x N x K", "pipert GF/s", "on OpenBLAS",
                                              "numpy GF/s", "/ numpy", "/ OpenBLAS"))
    for r, rb in zip(ours["results"], blas["results"]):
        m, n, k = r["m"], r["n"], r["k"]
        a = np.random.rand(m, k).astype(np.float32)
        b = np.random.rand(k, n).astype(np.float32)
        c = np.empty((m, n), dtype=np.float32)
        np.matmul(a, b, out=c)
        best, start, reps = 1e30, time.perf_counter(), 0
        while reps < 3 or time.perf_counter() - start < args.min_time:
            t0 = time.perf_counter()
            np.matmul(a, b, out=c)
            best = min(best, time.perf_counter() - t0)
            reps += 1
        gf = 2.0 * m * n * k / best * 1e-9
        print("%-18s %12.2f %14.2f %12.2f %9.2f %11.2f"
              % ("%dx%dx%d" % (m, n, k), r["gflops"], rb["gflops"], gf, r["gflops"] / gf,
                 r["gflops"] / rb["gflops"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
