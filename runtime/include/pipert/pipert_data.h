/*===- pipert_data.h - training data: .npz files and the batch feeder -----===*
 *
 * Data files are NumPy .npz archives (np.savez or np.savez_compressed): one
 * array per graph input, named like the input, C order, axis 0 the sample
 * axis. Supported element types: float32, float64, int64, int32, uint8, int8,
 * bool, float16 (little-endian).
 *
 * Feeding (DESIGN.md "Runtime contract"): with B samples per step and N rows,
 *  - no shuffle: step s reads rows (s*B + i) mod N, i = 0..B-1;
 *  - shuffle: the stream of rows is epoch 0's permutation, then epoch 1's, ...
 *    where epoch e's permutation of 0..N-1 is a Fisher-Yates shuffle driven by
 *    splitmix64 seeded with (seed, e): deterministic given seed and epoch, the
 *    same on every rank and platform. Step s reads stream positions
 *    s*B .. s*B+B-1 (a step may straddle two epochs).
 *
 * Errors (missing file, missing array, wrong dtype or shape, Fortran order,
 * corrupt archive) are fatal through pipert_fail, with the file and array
 * named.
 *===----------------------------------------------------------------------===*/
#ifndef PIPERT_PIPERT_DATA_H
#define PIPERT_PIPERT_DATA_H

#include "pipert/pipert.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An .npz archive loaded into host memory. */
typedef struct pipert_npz pipert_npz;

pipert_npz *pipert_npz_load(const char *path);
/* The same for the `n` arrays named (a rank reads only its graph inputs):
 * the file is mapped, not read into memory, and only these are checked
 * (CRC, .npy header) and copied out; the others are listed by name
 * (pipert_npz_count/name/find) but reading one is fatal. Names the archive
 * lacks are not an error here (reading them is). */
pipert_npz *pipert_npz_load_arrays(const char *path, const char *const *names, int n);
void pipert_npz_free(pipert_npz *npz);

/* Arrays in the archive, in archive order; names without the ".npy" suffix. */
int pipert_npz_count(const pipert_npz *npz);
const char *pipert_npz_name(const pipert_npz *npz, int index);
/* Index of the array `name`, or -1 when there is none. */
int pipert_npz_find(const pipert_npz *npz, const char *name);

/* Properties of array `name` (fatal when it is missing). The shape pointer
 * stays valid until pipert_npz_free. */
pipert_dtype pipert_npz_dtype(const pipert_npz *npz, const char *name);
int pipert_npz_ndim(const pipert_npz *npz, const char *name);
const int64_t *pipert_npz_shape(const pipert_npz *npz, const char *name);
/* Host pointer to the elements of `name`, after checking that it has type
 * `dtype` and `ndim` dimensions equal to `shape` (an entry of -1 matches any
 * extent; shape may be NULL when ndim < 0, which checks nothing). */
const void *pipert_npz_data(const pipert_npz *npz, const char *name, pipert_dtype dtype,
                            int ndim, const int64_t *shape);

/* Micro-batch k of m over a batch of `batch` rows: rows [*first, *first +
 * *count). When m does not divide batch, the first batch % m micro-batches
 * have one row more. */
void pipert_microbatch_rows(int64_t batch, int64_t num_micro, int64_t k, int64_t *first,
                            int64_t *count);
/* Copies micro-batch k of m of a batch tensor (rows of `row_bytes` bytes)
 * from src to dst, both backend memory. */
void pipert_microbatch_slice(pipert_context *ctx, void *dst, const void *src, int64_t row_bytes,
                             int64_t batch, int64_t num_micro, int64_t k);

/* Feeds mini-batches of B rows from the arrays of an archive (which must
 * outlive the feeder). */
typedef struct pipert_feeder pipert_feeder;

pipert_feeder *pipert_feeder_create(pipert_context *ctx, const pipert_npz *npz, int64_t batch,
                                    int shuffle, uint64_t seed);
void pipert_feeder_destroy(pipert_feeder *feeder);
/* Adds the input `name`; `shape` is the shape of one step's batch, shape[0]
 * == B, the other dims must equal the array's. Checks dtype, rank, dims and
 * that all inputs have the same number of rows. Returns the input's index. */
int pipert_feeder_add_input(pipert_feeder *feeder, const char *name, pipert_dtype dtype, int ndim,
                            const int64_t *shape);
/* Number of rows (samples) in the data. */
int64_t pipert_feeder_rows(const pipert_feeder *feeder);
/* The B row indices step `step` reads, into rows[0..B-1]. */
void pipert_feeder_step_rows(pipert_feeder *feeder, int64_t step, int64_t *rows);
/* Copies step `step`'s batch of input `input` into dst (backend memory of
 * B * row bytes). */
void pipert_feeder_fill(pipert_feeder *feeder, int64_t step, int input, void *dst);
/* Copies only micro-batch k of m of that batch into dst. */
void pipert_feeder_fill_microbatch(pipert_feeder *feeder, int64_t step, int input,
                                   int64_t num_micro, int64_t k, void *dst);

#ifdef __cplusplus
}
#endif

#endif /* PIPERT_PIPERT_DATA_H */
