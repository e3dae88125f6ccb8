/*===- pipert_checkpoint.h - checkpoints and ONNX export ------------------===*
 *
 * A checkpoint is a directory with one file per rank, "rank-<r>.ckpt", holding
 * that rank's named tensors (its parameters and optimizer state), the step
 * counter and the random generator state. Each file is written atomically:
 * to "rank-<r>.ckpt.tmp.<pid>" in the same directory, fsync'd, renamed over
 * the old file, and the directory fsync'd; a crash at any point leaves either
 * the old or the new checkpoint, never a torn one.
 *
 * File format (version 1, all integers little-endian):
 *   magic     8 bytes  "PIPECKPT"
 *   version   u32      1
 *   count     u32      number of tensors
 *   step      i64
 *   rng       u64      random generator state
 *   count x { name_len u32, name bytes (no NUL), dtype u32 (pipert_dtype),
 *             ndim u32, dims i64[ndim], nbytes u64, data bytes (C order) }
 *   crc       u32      CRC-32 (zlib) of every byte before it
 *
 * The ONNX export writes trained values back into a copy of the input model as
 * initializers (inline raw_data), so the result runs in any ONNX runtime.
 *===----------------------------------------------------------------------===*/
#ifndef PIPERT_PIPERT_CHECKPOINT_H
#define PIPERT_PIPERT_CHECKPOINT_H

#include "pipert/pipert.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A named tensor in backend memory. */
typedef struct pipert_named_tensor {
  const char *name;
  pipert_dtype dtype;
  int ndim;
  const int64_t *shape;
  void *data; /* read by save/export, written by load */
} pipert_named_tensor;

/* Saves this rank's tensors to <dir>/rank-<rank>.ckpt (creating dir if
 * needed). Fatal on any I/O error; the previous checkpoint survives it. */
void pipert_checkpoint_save(pipert_context *ctx, const char *dir, int rank, int64_t step,
                            uint64_t rng_state, const pipert_named_tensor *tensors, int n);

/* Loads <dir>/rank-<rank>.ckpt into the given tensors, matched by name; each
 * must be in the file with the same dtype and shape (fatal otherwise; a file
 * that is corrupt or truncated is fatal too). Tensors in the file that are
 * not asked for are ignored. Returns 0 and sets *step and *rng_state (either
 * may be NULL), or returns 1 when there is no checkpoint file (start fresh). */
int pipert_checkpoint_load(pipert_context *ctx, const char *dir, int rank, int64_t *step,
                           uint64_t *rng_state, pipert_named_tensor *tensors, int n);

/* A job's checkpoint is consistent across ranks: every rank saves into
 * <dir>/step-<N>/ (pipert_checkpoint_stage_dir), then, once all have, one
 * rank commits it by writing <dir>/LATEST ("step-<N>", atomically), and
 * the previous step directories are removed. A failure at any point leaves
 * LATEST naming a complete checkpoint. With $PIPERT_CHECKPOINT_RECORD set
 * (pipe-run: the data order and file, the plan), the commit first writes it
 * to <dir>/step-<N>/run-info, so a step's record is the run that wrote it.
 * pipert_checkpoint_resolve gives the
 * directory to load from: <dir>/<LATEST>, or <dir> itself when it has no
 * LATEST (a checkpoint of one pipert_checkpoint_save). */
const char *pipert_checkpoint_stage_dir(const char *dir, int64_t step, char *buf,
                                        size_t buf_len);
void pipert_checkpoint_commit(const char *dir, int64_t step);
/* Removes this rank's files of the step directories other than LATEST's
 * (and the directories once empty). */
void pipert_checkpoint_prune(const char *dir, int rank);
const char *pipert_checkpoint_resolve(const char *dir, char *buf, size_t buf_len);

/* Path of the checkpoint file of `rank` in `dir`, into buf; returns buf. */
const char *pipert_checkpoint_path(const char *dir, int rank, char *buf, size_t buf_len);

/* Writes a copy of the ONNX model `model_in` to `model_out` (atomically) with
 * the data of the initializers named in `tensors` replaced by their values
 * (inline raw_data). Every tensor must name an initializer of the same dtype
 * and shape (fatal otherwise). Initializers stored as external data are made
 * inline too, so the output stands alone. */
void pipert_export_onnx(pipert_context *ctx, const char *model_in, const char *model_out,
                        const pipert_named_tensor *tensors, int n);

#ifdef __cplusplus
}
#endif

#endif /* PIPERT_PIPERT_CHECKPOINT_H */
