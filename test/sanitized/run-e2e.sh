#!/usr/bin/env bash
# End-to-end runs under AddressSanitizer + UndefinedBehaviorSanitizer:
#
#   test/sanitized/run-e2e.sh BUILD SANITIZED_BUILD
#
# Compiles models with BUILD's pipe-compile, then runs every executable
# twice with pipe-run: once on BUILD's runtime, once on SANITIZED_BUILD's
# (ASan + UBSan; the device executables find it through LD_LIBRARY_PATH,
# which their RUNPATH yields to, with the sanitizer runtimes preloaded).
# A sanitizer report aborts its rank, so the run fails; the sanitized run's
# losses and saved weights must equal the plain run's (within 1e-5: the
# sanitized runtime is built with other optimisation flags). Covers one
# device, GPipe and 1F1B loops, PipeDream, 2BW, SpecTrain, PipeMare, AvgPipe
# and data-parallel pipelines, BatchNormalization state, checkpoint and
# resume, and --on-nonfinite skip. scripts/test-sanitized runs it when the
# compiler is built.
set -euo pipefail
build=$(cd "$1" && pwd)
sanitized=$(cd "$2" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="$build/bin:$PATH"
refpy=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

asan=$(${CXX:-c++} -print-file-name=libasan.so)
ubsan=$(${CXX:-c++} -print-file-name=libubsan.so)
if [ ! -f "$asan" ] || [ ! -f "$ubsan" ]; then
  echo "run-e2e: no libasan/libubsan next to ${CXX:-c++}: cannot preload the sanitizers" >&2
  exit 1
fi
sanitized_run() {
  env ASAN_OPTIONS="detect_leaks=0:abort_on_error=1" \
      UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
      LD_LIBRARY_PATH="$sanitized/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      LD_PRELOAD="$asan $ubsan" pipe-run "$@"
}

"$refpy" "$src/examples/models.py" --out . --models mlp --batch 8 --data 64 > /dev/null 2>&1
"$refpy" "$src/test/Models/Inputs/torch_reference.py" make . > /dev/null 2>&1

# The device executables must really run on the sanitized runtime.
pipe-compile mlp.onnx -o probe --stages 2 --microbatches 2 > /dev/null
loaded=$(env ASAN_OPTIONS=detect_leaks=0 LD_DEBUG=libs \
  LD_LIBRARY_PATH="$sanitized/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" LD_PRELOAD="$asan $ubsan" \
  pipe-run probe --data mlp.npz --steps 1 --no-shuffle --quiet 2>&1 |
  grep -c "calling init: $sanitized/lib/libpipert_cpu.so" || true)
if [ "$loaded" -lt 2 ]; then
  echo "run-e2e: FAIL: the device executables did not load $sanitized/lib/libpipert_cpu.so" >&2
  exit 1
fi

count=0
check() { # NAME MODEL DATA STEPS PIPE-COMPILE-FLAGS...
  local name=$1 model=$2 data=$3 steps=$4
  shift 4
  pipe-compile "$model" -o "$name" "$@"
  pipe-run "$name" --data "$data" --steps "$steps" --no-shuffle --quiet \
    --log "$name.plain.jsonl" --save "$name.plain.onnx"
  if ! sanitized_run "$name" --data "$data" --steps "$steps" --no-shuffle --quiet \
      --log "$name.san.jsonl" --save "$name.san.onnx" > "$name.san.out" 2>&1; then
    cat "$name.san.out" >&2
    echo "run-e2e: FAIL: $name under the sanitizers" >&2
    exit 1
  fi
  "$refpy" "$src/test/Tools/Inputs/pipeline_compare.py" --ref "$name.plain.jsonl" \
    --got "$name.san.jsonl" --steps "$steps" --rtol 1e-5 \
    --ref-onnx "$name.plain.onnx" --got-onnx "$name.san.onnx" > "$name.cmp" ||
    { cat "$name.cmp" >&2; echo "run-e2e: FAIL: $name differs under the sanitizers" >&2; exit 1; }
  count=$((count + 1))
}

opt=(--optimizer momentum --lr 0.05 --momentum 0.9)
check one mlp.onnx mlp.npz 4 "${opt[@]}"
check gpipe mlp.onnx mlp.npz 4 --stages 3 --microbatches 4 --schedule gpipe "${opt[@]}"
check 1f1b mlp.onnx mlp.npz 4 --stages 3 --microbatches 4 "${opt[@]}"
check pipedream mlp.onnx mlp.npz 4 --stages 2 --microbatches 2 --method pipedream "${opt[@]}"
check 2bw mlp.onnx mlp.npz 4 --stages 2 --microbatches 2 --method 2bw --optimizer adam --lr 0.01
check spectrain mlp.onnx mlp.npz 4 --stages 2 --microbatches 2 --method spectrain "${opt[@]}"
check pipemare mlp.onnx mlp.npz 4 --stages 3 --microbatches 2 --method pipemare --lr-warmup 4 --discrepancy-correction 0.9 "${opt[@]}"
check avgpipe mlp.onnx mlp.npz 4 --stages 2 --microbatches 2 --pipelines 2 --method avgpipe "${opt[@]}"
check dp mlp.onnx mlp.npz 4 --stages 2 --microbatches 2 --pipelines 2 "${opt[@]}"
check bn bn.onnx bn.npz 4 --stages 2 --microbatches 2 "${opt[@]}"

# Checkpoint and resume, and a skipped non-finite step, on the sanitized
# runtime.
sanitized_run 1f1b --data mlp.npz --steps 2 --no-shuffle --quiet --checkpoint ck > ck.out 2>&1 ||
  { cat ck.out >&2; echo "run-e2e: FAIL: checkpoint under the sanitizers" >&2; exit 1; }
sanitized_run 1f1b --data mlp.npz --steps 4 --no-shuffle --quiet --resume ck \
  --save resumed.onnx > resume.out 2>&1 ||
  { cat resume.out >&2; echo "run-e2e: FAIL: resume under the sanitizers" >&2; exit 1; }
"$refpy" - "$work" <<'PY'
import sys, numpy as np, onnx
from onnx import numpy_helper
w = lambda p: {t.name: numpy_helper.to_array(t) for t in onnx.load(p).graph.initializer}
a, b = w(sys.argv[1] + "/1f1b.plain.onnx"), w(sys.argv[1] + "/resumed.onnx")
bad = [n for n in a if np.max(np.abs(a[n] - b[n])) > 1e-5 * (np.max(np.abs(a[n])) + 1e-30)]
sys.exit(f"run-e2e: FAIL: resumed weights differ: {bad}" if bad else 0)
PY
count=$((count + 1))
pipe-compile mlp.onnx -o huge --optimizer sgd --lr 1e38
sanitized_run huge --data mlp.npz --steps 6 --no-shuffle --quiet --on-nonfinite skip > skip.out 2>&1 ||
  { cat skip.out >&2; echo "run-e2e: FAIL: --on-nonfinite skip under the sanitizers" >&2; exit 1; }
grep -q "skipped" skip.out ||
  { cat skip.out >&2; echo "run-e2e: FAIL: no step was skipped" >&2; exit 1; }
count=$((count + 1))
echo "run-e2e: $count end-to-end runs passed under ASan + UBSan"
