#!/usr/bin/env bash
# Runs the importer's libFuzzer target for a bounded time on a seed corpus of
# real models (examples/ and a slice of Debian's ONNX backend test models).
# usage: run_fuzzer.sh FUZZER SOURCE_DIR WORK_DIR SECONDS
set -euo pipefail
fuzzer=$1 src=$2 work=$3 seconds=$4
rm -rf "$work" && mkdir -p "$work/corpus" "$work/seeds"
cp "$src/examples/mlp.onnx" "$work/seeds/"
cp "$src"/test/Import/*.onnxtext "$work/seeds/" 2>/dev/null || true
i=0
for m in /usr/share/libonnx-testdata/data/node/test_{gemm,relu,conv,softmax,reshape,gather,concat,slice,unsqueeze,split}*/model.onnx; do
  [ -f "$m" ] || continue
  cp "$m" "$work/seeds/seed$i.onnx"; i=$((i+1))
done
cd "$work"
export ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1
"$fuzzer" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=3000 ${FUZZ_RUNS:+-runs=$FUZZ_RUNS} \
  -max_len=65536 -print_final_stats=1 corpus seeds 2>&1 | tail -n 25
