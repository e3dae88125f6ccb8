//===- trace_merge_main.cpp - pipert-trace-merge: per-rank traces → one ----===//
//
//   pipert-trace-merge OUT.json IN0.json IN1.json ...
//
// Combines the Chrome trace files that each rank wrote into one file with one
// process track per device, on a common time axis; open it in Perfetto.
#include "pipert/pipert_trace.h"

#include <cstdio>

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s OUT.json IN.json [IN.json ...]\n", argv[0]);
    return 2;
  }
  char err[1024];
  if (pipert_trace_merge(argv + 2, argc - 2, argv[1], err, sizeof err) != 0) {
    std::fprintf(stderr, "pipert-trace-merge: error: %s\n", err);
    return 1;
  }
  return 0;
}
