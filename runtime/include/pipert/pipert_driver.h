/*===- pipert_driver.h - the main loop of a generated training program ----===*
 *
 * pipe-compile emits, per device, an object with a step function and a
 * constant pipert_program_info describing it, plus a `main` that calls
 * pipert_train_main. The driver does everything around the step: command
 * line, data (pipert_data.h), initial values, the step loop, logs
 * (pipert_log.h), checkpoints and ONNX export (pipert_checkpoint.h), traces.
 *
 * The step function (generated):
 *   void step(pipert_context *ctx, void *const *inputs, void *const *persistent,
 *             float *loss, int64_t step);
 * reads one mini-batch from inputs[i] (device buffers shaped like
 * info->inputs[i]), reads and updates the persistent buffers (parameters,
 * optimizer state; for no-flush methods also weight versions, gradient
 * accumulators and the activations in flight) in place, and writes the
 * mini-batch's mean loss, computed before this step's update, to the host
 * float *loss.
 *
 * Command line of a program (pipe-run passes it on):
 *   --data D.npz --steps K [--no-shuffle] [--seed S] [--log steps.jsonl]
 *   [--save trained.onnx] [--checkpoint DIR] [--resume DIR] [--trace t.json]
 *   [--threads N] [--quiet] [--eval-data V.npz [--eval-every K]
 *   [--eval-batches N]]
 *
 * Several devices (n_devices > 1, pipeline parallelism): the executables of
 * all devices run as one MPI job, MPMD, rank k running device<k>
 * (mpirun -np 1 device0 : -np 1 device1 ...; pipe-run does this). Each rank
 * initialises the transport, holds only its stage's parameters and optimizer
 * state, reads the data only when its program feeds a graph input (n_inputs
 * > 0: the first stage, and the last for the labels), and only the rank whose
 * step reports the loss (has_loss) logs. --checkpoint/--resume write and read
 * <dir>/rank-<k>.ckpt per rank. --save gathers every rank's parameters on
 * rank 0 (name, dtype, shape and bytes over the transport), which writes one
 * ONNX model with all of them. --eval-data calls `eval` on V's batches in
 * order (B rows each, pipeline i its own: global batch j*P + i) after every
 * K-th step and after the last, on every rank, and logs the mean of the
 * batches' losses.
 *===----------------------------------------------------------------------===*/
#ifndef PIPERT_PIPERT_DRIVER_H
#define PIPERT_PIPERT_DRIVER_H

#include "pipert/pipert.h"
#include "pipert/pipert_comm.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PIPERT_PROGRAM_ABI_VERSION 7

typedef enum pipert_tensor_kind {
  PIPERT_TENSOR_INPUT = 0,  /* fed from the data, one mini-batch per step */
  PIPERT_TENSOR_PARAM = 1,  /* trainable parameter: checkpointed, exported */
  PIPERT_TENSOR_FROZEN = 2, /* parameter that is not trained */
  PIPERT_TENSOR_STATE = 3,  /* optimizer state, counters: checkpointed */
  /* fed from the data: the mini-batches of the step of every data-parallel
   * pipeline, one after the other (shape[0] = pipelines * B) */
  PIPERT_TENSOR_INPUT_PIPELINES = 4,
} pipert_tensor_kind;

typedef struct pipert_tensor_info {
  const char *name;     /* graph input / ONNX initializer / state name */
  int32_t dtype;        /* pipert_dtype */
  int32_t ndim;
  const int64_t *shape; /* ndim entries; inputs: shape[0] is the batch */
  const void *init;     /* host bytes of the initial value; NULL: zeros */
  int64_t init_bytes;
  int32_t kind;         /* pipert_tensor_kind */
} pipert_tensor_info;

typedef void (*pipert_step_fn)(pipert_context *ctx, void *const *inputs,
                               void *const *persistent, float *loss, int64_t step);

typedef struct pipert_program_info {
  int32_t abi_version; /* PIPERT_PROGRAM_ABI_VERSION */
  int32_t n_inputs;
  const pipert_tensor_info *inputs;
  int32_t n_persistent;
  const pipert_tensor_info *persistent;
  int64_t batch;
  const char *model_file; /* the ONNX model, relative to the executable's
                             directory (for --save); may be NULL */
  const char *optimizer;  /* "sgd", "adam", ... or "none" */
  pipert_step_fn step;
  int32_t device;       /* this executable's device (= its MPI rank) */
  int32_t n_devices;    /* executables in the job; 1: no transport */
  int32_t has_loss;     /* the step writes *loss (the last stage) */
  /* No-flush methods (PipeDream, 2BW): micro-batches of one step are still
   * in flight when the next one starts. After the last step the driver
   * writes the checkpoint (in-flight state included), then calls `step`
   * drain_steps more times (steps K, K+1, ...; inputs not filled, loss
   * ignored) to finish them, then `finish` (step = K), which puts the newest
   * weight version where --save reads it. 0 and NULL for synchronous ones. */
  int32_t drain_steps;
  /* P pipelines of n_devices / P stages (rank r: stage r mod S of pipeline
   * r / S). Pipeline i trains on the global mini-batches t*P + i; the logged
   * loss is the mean over pipelines (pipeline 0's last stage logs); --save
   * writes pipeline 0's weights (after `finish`, the AvgPipe centre). 1: one
   * pipeline. */
  int32_t pipelines;
  pipert_step_fn finish;
  /* The evaluation pass (--eval-data): the same arguments as `step`, the
   * mini-batch in `inputs`; runs the forward in inference mode (Dropout
   * off, BatchNormalization on its running statistics) over the M
   * micro-batches, writes the mini-batch's mean loss (on the device that
   * reports it) and changes no persistent buffer. Every device of a
   * pipeline calls it at the same point between steps. NULL where the
   * program has none (the no-flush methods). */
  pipert_step_fn eval;
  /* The counts `eval` writes after the loss (its `loss` argument is then an
   * array of 1 + eval_metrics floats), summed over its micro-batches: 2 for
   * a classification loss's top-1 accuracy (loss[1] the labels whose
   * largest score is their class, loss[2] the labels counted, ignore_index
   * left out); 0 where the loss has no class scores. */
  int32_t eval_metrics;
} pipert_program_info;

/* The number of training steps of the run (--steps), for a step function
 * that must know where the run ends (a no-flush program skips the
 * micro-batches after it). */
int64_t pipert_run_steps(const pipert_context *ctx);

/* The replicas of this rank's stage across pipelines (pipert's stage group),
 * made once by the driver when the program has several pipelines. */
pipert_comm *pipert_replica_comm(pipert_context *ctx);

/* The ranks of this rank's pipeline (pipert's pipeline group), made at the
 * first call (collective over the world: every rank's program calls it at
 * the same point of its first step). */
pipert_comm *pipert_pipeline_comm(pipert_context *ctx);

/* Runs the training loop described by the command line; returns the exit
 * status (errors print one "pipert: error: ..." line). */
int pipert_train_main(int argc, char **argv, const pipert_program_info *info);

#ifdef __cplusplus
}
#endif

#endif /* PIPERT_PIPERT_DRIVER_H */
