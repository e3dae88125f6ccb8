#!/usr/bin/env bash
# Runs the .npz reader's libFuzzer target for a bounded time, seeded with
# archives numpy writes (stored and deflated; every dtype pipert reads, empty
# and scalar arrays, Fortran order, big-endian).
# Inputs that once failed (npz-regressions/, beside this script) run first.
# usage: run_npz_fuzzer.sh FUZZER PYTHON WORK_DIR SECONDS
set -euo pipefail
fuzzer=$1 python=$2 work=$3 seconds=$4
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work/corpus" "$work/seeds"
cp "$here"/npz-regressions/* "$work/seeds/"
"$python" - "$work/seeds" <<'PY'
import sys, numpy as n
out = sys.argv[1]
r = n.random.default_rng(0)
arrays = {"x": r.standard_normal((4, 3)).astype(n.float32),
          "y": n.arange(4, dtype=n.int64), "b": n.array([True, False]),
          "h": n.ones((2, 2), n.float16), "d": n.zeros(3), "i": n.arange(6, dtype=n.int32).reshape(2, 3),
          "u": n.arange(5, dtype=n.uint8), "s": n.int8(-3), "e": n.zeros((0, 4), n.float32)}
n.savez(f"{out}/stored.npz", **arrays)
n.savez_compressed(f"{out}/deflated.npz", **arrays)
n.savez(f"{out}/fortran.npz", x=n.asfortranarray(r.standard_normal((3, 2)).astype(n.float32)))
n.savez(f"{out}/bigendian.npz", x=n.arange(3, dtype=">f4"))
n.savez(f"{out}/one.npz", x=n.float32(1.5))
PY
cd "$work"
# allow_user_poisoning=0: see test/Dialect/run_fuzzer.sh.
export ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:allow_user_poisoning=0
"$fuzzer" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=3000 ${FUZZ_RUNS:+-runs=$FUZZ_RUNS} \
  -max_len=8192 -print_final_stats=1 corpus seeds 2>&1 | tail -n 12
