//===- shape_util.h - host-side shape helpers shared by the backends ------===//
//
// Shape arithmetic that every backend's kernels do on the host before they
// launch: element counts, axis normalisation, numpy broadcasting. Errors end
// the rank through pipert_fail, naming the kernel.
//
//===----------------------------------------------------------------------===//
#ifndef PIPERT_CORE_SHAPE_UTIL_H
#define PIPERT_CORE_SHAPE_UTIL_H

#include "pipert/pipert.h"

#include <algorithm>
#include <cstdint>

namespace pipert {

constexpr int kMaxRank = 16;

inline int64_t numel(int64_t rank, const int64_t *shape) {
  int64_t n = 1;
  for (int64_t i = 0; i < rank; ++i)
    n *= shape[i];
  return n;
}

inline void check_rank(const char *op, int64_t rank) {
  if (rank < 0 || rank > kMaxRank)
    pipert_fail("%s: rank %lld is outside 0..%d", op, (long long)rank, kMaxRank);
}

// Resolves a possibly negative axis against `rank`, failing when out of range.
inline int64_t norm_axis(const char *op, int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    pipert_fail("%s: axis %lld out of range for rank %lld", op, (long long)axis,
                (long long)rank);
  return a;
}

// outer = prod(shape[:axis]), mid = shape[axis], inner = prod(shape[axis+1:]).
struct AxisSplit {
  int64_t outer = 1, mid = 1, inner = 1;
};
inline AxisSplit split_at(int64_t rank, const int64_t *shape, int64_t axis) {
  AxisSplit s;
  for (int64_t i = 0; i < axis; ++i)
    s.outer *= shape[i];
  s.mid = shape[axis];
  for (int64_t i = axis + 1; i < rank; ++i)
    s.inner *= shape[i];
  return s;
}

// Numpy broadcast of two shapes into `out` (rank max(ra, rb)); fails if they
// are incompatible.
inline int64_t broadcast_shape(const char *op, int64_t ra, const int64_t *a, int64_t rb,
                               const int64_t *b, int64_t *out) {
  int64_t r = std::max(ra, rb);
  for (int64_t i = 0; i < r; ++i) {
    int64_t da = i < r - ra ? 1 : a[i - (r - ra)];
    int64_t db = i < r - rb ? 1 : b[i - (r - rb)];
    if (da != db && da != 1 && db != 1)
      pipert_fail("%s: shapes do not broadcast (axis %lld: %lld vs %lld)", op, (long long)i,
                  (long long)da, (long long)db);
    out[i] = da == 1 ? db : da;
  }
  return r;
}

} // namespace pipert

#endif
