#!/bin/bash
# expect_failure.sh MAX_SECONDS REGEX COMMAND...
# Runs COMMAND; passes when it exits non-zero within MAX_SECONDS and its
# output (stdout + stderr) matches the extended regular expression REGEX.
max=$1; regex=$2; shift 2
start=$(date +%s%N)
out=$(timeout -k 5 $((max + 30)) "$@" 2>&1)
rc=$?
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "$out"
echo "--- exit status $rc after ${elapsed_ms} ms"
if [ $rc -eq 0 ]; then echo "FAIL: the job succeeded, a failure was expected"; exit 1; fi
if [ $rc -eq 124 ]; then echo "FAIL: the job hung and was stopped by timeout"; exit 1; fi
if ! grep -Eq -- "$regex" <<<"$out"; then echo "FAIL: output does not match: $regex"; exit 1; fi
if [ $elapsed_ms -gt $((max * 1000)) ]; then echo "FAIL: took ${elapsed_ms} ms, more than ${max} s"; exit 1; fi
echo "PASS"
