#!/usr/bin/env bash
# Runs the pipe-dialect libFuzzer target (parse, verify, print, parse again)
# for a bounded time, seeded with the dialect tests split at "// -----".
# usage: run_fuzzer.sh FUZZER SOURCE_DIR WORK_DIR SECONDS
# A long campaign: run_fuzzer.sh build/fuzz/bin/pipe-dialect-fuzzer . /tmp/df 3600
set -euo pipefail
fuzzer=$1 src=$2 work=$3 seconds=$4
rm -rf "$work" && mkdir -p "$work/corpus" "$work/seeds"
i=0
for f in "$src"/test/Dialect/pipe/*.mlir "$src"/test/Dialect/onnx/*.mlir "$src"/test/Transforms/*.mlir; do
  [ -f "$f" ] || continue
  # One seed per split section, without the RUN/CHECK comment lines.
  awk -v dir="$work/seeds" -v base="s$i" '
    /^\/\/ -----/ { n++; next }
    /^\/\/ *(RUN|CHECK|expected)/ { next }
    { print > (dir "/" base "_" n ".mlir") }' "$f"
  i=$((i+1))
done
cd "$work"
# allow_user_poisoning=0: libMLIR.so is not instrumented, and the poisoning
# that LLVM's allocators do in instrumented code misfires on its memory.
export ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:allow_user_poisoning=0
"$fuzzer" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=3000 ${FUZZ_RUNS:+-runs=$FUZZ_RUNS} \
  -max_len=16384 -print_final_stats=1 corpus seeds 2>&1 | tail -n 25
