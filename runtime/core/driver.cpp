//===- driver.cpp - pipert_train_main: the loop around a generated step ---===//
//
// See pipert_driver.h. Everything here is host-side bookkeeping; the step
// function does all device work. Command-line mistakes print one
// "pipert: error: ..." line and return 2; runtime failures (data, I/O) end
// the process through pipert_fail.
//
//===----------------------------------------------------------------------===//
#include "pipert/pipert_driver.h"

#include "pipert/pipert_checkpoint.h"
#include "pipert/pipert_comm.h"
#include "pipert/pipert_data.h"
#include "pipert/pipert_log.h"
#include "pipert/pipert_trace.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

struct Options {
  std::string data, log, save, checkpoint, resume, trace;
  int64_t steps = -1;
  /* --eval-data V.npz: an evaluation pass (the program's eval entry) over
   * V's batches after every --eval-every K-th step and after the last;
   * --eval-batches N: at most N batches (of B rows times the pipelines). */
  std::string evalData;
  int64_t evalEvery = 0, evalBatches = 0;
  /* --checkpoint-every K: a checkpoint after every K-th step as well. */
  int64_t checkpointEvery = 0;
  uint64_t seed = 0;
  bool shuffle = true;
  bool quiet = false;
  int threads = 0;
  /* --on-nonfinite: what a NaN or infinite loss does. */
  enum Nonfinite { Stop, Skip, Warn } onNonfinite = Stop;
};

int usageError(const char *fmt, const char *what) {
  // One write (see pipert_fail).
  char message[2048];
  std::snprintf(message, sizeof message, fmt, what);
  std::fprintf(stderr, "pipert: error: %s\n", message);
  return 2;
}

bool parseInt(const char *s, int64_t &out) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(s, &end, 10);
  if (errno || !end || *end || end == s)
    return false;
  out = v;
  return true;
}

int parseOptions(int argc, char **argv, Options &o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string &dst) -> bool {
      if (i + 1 >= argc)
        return false;
      // An option is not a value (`--log --quiet`).
      static const char *const known[] = {
          "--data", "--log", "--save", "--checkpoint", "--resume", "--trace", "--steps",
          "--seed", "--threads", "--checkpoint-every", "--on-nonfinite", "--no-shuffle",
          "--quiet", "--eval-data", "--eval-every", "--eval-batches"};
      for (const char *k : known)
        if (!std::strcmp(argv[i + 1], k))
          return false;
      dst = argv[++i];
      return true;
    };
    std::string text;
    if (a == "--no-shuffle") {
      o.shuffle = false;
    } else if (a == "--quiet") {
      o.quiet = true;
    } else if (a == "--data" || a == "--log" || a == "--save" ||
               a == "--checkpoint" || a == "--resume" || a == "--trace" ||
               a == "--eval-data") {
      std::string &dst = a == "--data" ? o.data
                         : a == "--eval-data" ? o.evalData
                         : a == "--log" ? o.log
                         : a == "--save" ? o.save
                         : a == "--checkpoint" ? o.checkpoint
                         : a == "--resume" ? o.resume
                                           : o.trace;
      if (!value(dst))
        return usageError("option %s needs a value", a.c_str());
    } else if (a == "--on-nonfinite") {
      if (!value(text) || (text != "stop" && text != "skip" && text != "warn"))
        return usageError("option %s needs stop, skip or warn", a.c_str());
      o.onNonfinite = text == "stop"   ? Options::Stop
                      : text == "skip" ? Options::Skip
                                       : Options::Warn;
    } else if (a == "--steps" || a == "--seed" || a == "--threads" ||
               a == "--checkpoint-every" || a == "--eval-every" || a == "--eval-batches") {
      int64_t v;
      if (!value(text) || !parseInt(text.c_str(), v) || v < 0)
        return usageError("option %s needs a non-negative integer", a.c_str());
      if ((a == "--eval-every" || a == "--eval-batches") && v < 1)
        return usageError("option %s needs an integer >= 1", a.c_str());
      if (a == "--eval-every")
        o.evalEvery = v;
      else if (a == "--eval-batches")
        o.evalBatches = v;
      else if (a == "--steps")
        o.steps = v;
      else if (a == "--checkpoint-every")
        o.checkpointEvery = v;
      else if (a == "--seed")
        o.seed = static_cast<uint64_t>(v);
      else
        o.threads = static_cast<int>(v);
    } else {
      return usageError("unknown option '%s' (--data --steps --no-shuffle "
                        "--seed --log --save --checkpoint --checkpoint-every "
                        "--resume --trace --threads --on-nonfinite --quiet "
                        "--eval-data --eval-every --eval-batches)",
                        a.c_str());
    }
  }
  if (o.data.empty())
    return usageError("%s", "--data D.npz is required");
  if (o.steps < 0)
    return usageError("%s", "--steps K is required");
  if (o.checkpointEvery > 0 && o.checkpoint.empty())
    return usageError("%s", "--checkpoint-every K needs --checkpoint DIR");
  if ((o.evalEvery > 0 || o.evalBatches > 0) && o.evalData.empty())
    return usageError("%s", "--eval-every and --eval-batches need --eval-data V.npz");
  return 0;
}

int64_t tensorBytes(const pipert_tensor_info &t);

/// Where a non-finite loss shows in this rank's weights: the first trained
/// parameter holding a NaN or infinity, or that they are all finite.
std::string describeNonfinite(pipert_context *ctx, const pipert_program_info *info,
                              const std::vector<void *> &persistent, int stage) {
  std::string here = stage < 0 ? std::string("the model's")
                               : "stage " + std::to_string(stage) + "'s";
  for (int i = 0; i < info->n_persistent; ++i) {
    const pipert_tensor_info &t = info->persistent[i];
    if (t.kind != PIPERT_TENSOR_PARAM || t.dtype != PIPERT_F32)
      continue;
    int64_t n = tensorBytes(t) / 4;
    std::vector<float> host(static_cast<size_t>(n));
    pipert_copy_to_host(ctx, host.data(), persistent[i], static_cast<size_t>(n) * 4);
    for (int64_t k = 0; k < n; ++k)
      if (!std::isfinite(host[static_cast<size_t>(k)]))
        return "the first of " + here + " parameters with one is '" +
               std::string(t.name) + "' (element " + std::to_string(k) + ")";
  }
  return "all of " + here + " parameters are finite (it comes from " +
         (stage > 0 ? std::string("an earlier stage or ") : std::string()) +
         "the data, or the loss itself)";
}

std::string executableDir() {
  std::vector<char> buf(4096);
  ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0)
    return ".";
  std::string path(buf.data(), static_cast<size_t>(n));
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

int64_t tensorBytes(const pipert_tensor_info &t) {
  int64_t n = 1;
  for (int d = 0; d < t.ndim; ++d)
    n *= t.shape[d];
  return n * static_cast<int64_t>(pipert_dtype_size(static_cast<pipert_dtype>(t.dtype)));
}

std::string shapeText(int ndim, const int64_t *shape) {
  std::string s = "(";
  for (int d = 0; d < ndim; ++d)
    s += (d ? ", " : "") + std::to_string(shape[d]);
  return s + (ndim == 1 ? ",)" : ")");
}

/// Checks the data against the program before the feeder does, so that
/// the message says what the model expects.
void checkData(const pipert_npz *npz, const std::string &path,
               const pipert_program_info *info) {
  std::string names;
  for (int i = 0; i < info->n_inputs; ++i)
    names += (i ? ", " : "") + std::string(info->inputs[i].name);
  int64_t rows = -1;
  std::string firstName;
  for (int i = 0; i < info->n_inputs; ++i) {
    const pipert_tensor_info &t = info->inputs[i];
    if (pipert_npz_find(npz, t.name) < 0)
      pipert_fail("%s: no array '%s' (the model's inputs are: %s)",
                  path.c_str(), t.name, names.c_str());
    pipert_dtype dtype = pipert_npz_dtype(npz, t.name);
    if (dtype != t.dtype)
      pipert_fail("%s: array '%s' is %s, but the model's input '%s' is %s",
                  path.c_str(), t.name, pipert_dtype_name(dtype), t.name,
                  pipert_dtype_name(static_cast<pipert_dtype>(t.dtype)));
    int ndim = pipert_npz_ndim(npz, t.name);
    const int64_t *shape = pipert_npz_shape(npz, t.name);
    bool ok = ndim == t.ndim;
    for (int d = 1; ok && d < ndim; ++d)
      ok = shape[d] == t.shape[d];
    if (!ok) {
      std::string expect = "(N";
      for (int d = 1; d < t.ndim; ++d)
        expect += ", " + std::to_string(t.shape[d]);
      expect += t.ndim == 1 ? ",)" : ")";
      pipert_fail("%s: array '%s' has shape %s, but the model's input '%s' "
                  "needs samples of shape %s",
                  path.c_str(), t.name, shapeText(ndim, shape).c_str(),
                  t.name, expect.c_str());
    }
    if (rows >= 0 && shape[0] != rows)
      pipert_fail("%s: arrays '%s' and '%s' have different numbers of "
                  "samples (%lld and %lld)",
                  path.c_str(), firstName.c_str(), t.name, (long long)rows,
                  (long long)shape[0]);
    if (rows < 0) {
      rows = shape[0];
      firstName = t.name;
    }
  }
  if (rows == 0)
    pipert_fail("%s: the data has no samples", path.c_str());
}

/// The arrays of the program's inputs in the data file at `path` (only
/// those are copied out of the mapped file), checked against the program.
pipert_npz *loadInputs(const std::string &path, const pipert_program_info *info) {
  std::vector<const char *> names;
  for (int i = 0; i < info->n_inputs; ++i)
    names.push_back(info->inputs[i].name);
  pipert_npz *npz = pipert_npz_load_arrays(path.c_str(), names.data(), int(names.size()));
  checkData(npz, path, info);
  return npz;
}

// Tags of the --save gather (the step's transfers use tags below 32768).
// The most counts an evaluation entry writes after its loss (the accuracy's).
constexpr int kMaxEvalMetrics = 2;
constexpr int kSaveTagHeader = 32760;
constexpr int kSaveTagName = 32761;
constexpr int kSaveTagData = 32762;

/// Host bytes over the transport, through a backend buffer.
void sendHost(pipert_context *ctx, pipert_comm *comm, const void *data,
              size_t bytes, int peer, int tag) {
  void *dev = pipert_alloc(ctx, bytes ? bytes : 1);
  if (bytes)
    pipert_copy_to_device(ctx, dev, data, bytes);
  pipert_send(ctx, comm, dev, static_cast<int64_t>(bytes), PIPERT_U8, peer, tag);
  pipert_free(ctx, dev);
}

void recvHost(pipert_context *ctx, pipert_comm *comm, void *data, size_t bytes,
              int peer, int tag) {
  void *dev = pipert_alloc(ctx, bytes ? bytes : 1);
  pipert_recv(ctx, comm, dev, static_cast<int64_t>(bytes), PIPERT_U8, peer, tag);
  if (bytes)
    pipert_copy_to_host(ctx, data, dev, bytes);
  pipert_free(ctx, dev);
}

/// What rank 0 receives of another rank's parameters; owns the memory.
struct GatheredTensor {
  std::string name;
  std::vector<int64_t> shape;
  int32_t dtype = 0;
  void *data = nullptr;
};

/// --save under several ranks: every other rank sends its parameters to
/// rank 0 (count, then per tensor a header [name length, dtype, ndim, bytes,
/// shape...], the name and the bytes), which receives them rank by rank.
void gatherParameters(pipert_context *ctx, int rank, int size,
                      const std::vector<pipert_named_tensor> &params,
                      std::vector<GatheredTensor> &gathered) {
  pipert_comm *world = pipert_comm_world(ctx);
  if (rank != 0) {
    int64_t count = static_cast<int64_t>(params.size());
    sendHost(ctx, world, &count, sizeof count, 0, kSaveTagHeader);
    for (const pipert_named_tensor &t : params) {
      int64_t n = 1;
      for (int d = 0; d < t.ndim; ++d)
        n *= t.shape[d];
      int64_t bytes = n * static_cast<int64_t>(pipert_dtype_size(t.dtype));
      std::vector<int64_t> header = {static_cast<int64_t>(std::strlen(t.name)),
                                     t.dtype, t.ndim, bytes};
      header.insert(header.end(), t.shape, t.shape + t.ndim);
      int64_t headerLen = static_cast<int64_t>(header.size());
      sendHost(ctx, world, &headerLen, sizeof headerLen, 0, kSaveTagHeader);
      sendHost(ctx, world, header.data(), header.size() * sizeof(int64_t), 0,
               kSaveTagHeader);
      sendHost(ctx, world, t.name, std::strlen(t.name), 0, kSaveTagName);
      pipert_send(ctx, world, t.data, bytes, PIPERT_U8, 0, kSaveTagData);
    }
    return;
  }
  for (int peer = 1; peer < size; ++peer) {
    int64_t count = 0;
    recvHost(ctx, world, &count, sizeof count, peer, kSaveTagHeader);
    for (int64_t i = 0; i < count; ++i) {
      int64_t headerLen = 0;
      recvHost(ctx, world, &headerLen, sizeof headerLen, peer, kSaveTagHeader);
      if (headerLen < 4 || headerLen > 4 + 64)
        pipert_fail("--save: rank %d sent a malformed tensor header", peer);
      std::vector<int64_t> header(static_cast<size_t>(headerLen));
      recvHost(ctx, world, header.data(), header.size() * sizeof(int64_t), peer,
               kSaveTagHeader);
      GatheredTensor t;
      t.name.resize(static_cast<size_t>(header[0]));
      recvHost(ctx, world, t.name.data(), t.name.size(), peer, kSaveTagName);
      t.dtype = static_cast<int32_t>(header[1]);
      t.shape.assign(header.begin() + 4, header.begin() + 4 + header[2]);
      t.data = pipert_alloc(ctx, static_cast<size_t>(header[3] ? header[3] : 1));
      pipert_recv(ctx, world, t.data, header[3], PIPERT_U8, peer, kSaveTagData);
      gathered.push_back(std::move(t));
    }
  }
}

/// --steps of the running program (pipert_run_steps).
int64_t runSteps = 0;
/// Several pipelines: the replicas of this rank's stage (pipert_replica_comm).
pipert_comm *replicaComm = nullptr;
/// The ranks of this rank's pipeline (pipert_pipeline_comm), made at the
/// first call; the layout it is made from.
pipert_comm *pipelineComm = nullptr;
int layoutPipelines = 1, layoutStages = 1;
bool layoutMulti = false;

} // namespace

extern "C" int64_t pipert_run_steps(const pipert_context *) { return runSteps; }

extern "C" pipert_comm *pipert_replica_comm(pipert_context *) {
  if (!replicaComm)
    pipert_fail("this program averages over pipelines, but it runs as one "
                "pipeline (compile it with --pipelines P)");
  return replicaComm;
}

extern "C" pipert_comm *pipert_pipeline_comm(pipert_context *ctx) {
  if (!layoutMulti)
    pipert_fail("this program reduces over its pipeline's ranks, but it runs as one "
                "device (recompile it)");
  // Collective over the world: every rank's program reaches its first
  // pipeline-wide collective (gradient clipping) in the same step, after
  // the same world-wide operations.
  if (!pipelineComm)
    pipelineComm = pipert_comm_pipeline_group(ctx, layoutPipelines, layoutStages);
  return pipelineComm;
}

extern "C" int pipert_train_main(int argc, char **argv,
                                 const pipert_program_info *info) {
  if (!info || info->abi_version != PIPERT_PROGRAM_ABI_VERSION) {
    std::fprintf(stderr, "pipert: error: this program was compiled for "
                         "another runtime ABI version (recompile it)\n");
    return 2;
  }
  Options o;
  if (int rc = parseOptions(argc, argv, o))
    return rc;

  // A full disk or a file-size limit makes a write fail (and the checkpoint
  // writer keep the previous checkpoint, with a clear error) instead of
  // killing the process with SIGXFSZ.
  std::signal(SIGXFSZ, SIG_IGN);
  pipert_context *ctx = pipert_context_create(o.threads, o.seed);
  const bool multi = info->n_devices > 1;
  // P pipelines of S stages, pipeline-major: rank r is stage r mod S of
  // pipeline r / S.
  const int pipelines = info->pipelines > 1 ? info->pipelines : 1;
  const int stagesPerPipeline = info->n_devices / pipelines;
  const int pipeline = info->device / stagesPerPipeline;
  layoutPipelines = pipelines;
  layoutStages = stagesPerPipeline;
  layoutMulti = multi;
  int rank = 0;
  // A one-device program started as one of several MPI ranks (an OUT whose
  // device0 came from another compile): it would train alone while the
  // other ranks wait on it for ever.
  if (!multi)
    for (const char *var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
      if (const char *size = std::getenv(var); size && std::atoi(size) > 1)
        pipert_fail("this program is compiled for one device, but the MPI job has %s "
                    "ranks: every device<k> of OUT must come from one pipe-compile "
                    "(compile again)",
                    size);
  if (multi) {
    pipert_comm_init(ctx, &argc, &argv);
    pipert_comm *world = pipert_comm_world(ctx);
    rank = pipert_comm_rank(world);
    if (pipert_comm_size(world) != info->n_devices)
      pipert_fail("this program is one of %d devices, but the MPI job has %d "
                  "ranks (run it with pipe-run)",
                  info->n_devices, pipert_comm_size(world));
    if (rank != info->device)
      pipert_fail("rank %d runs the executable of device %d; launch "
                  "device<k> as rank k (mpirun -np 1 device0 : -np 1 "
                  "device1 ...)",
                  rank, info->device);
    pipert_set_error_rank(rank);
    // Each rank its own random stream (Dropout masks): seeded alike, the
    // stages' first draws were the same, so same-sized Dropouts of two
    // stages kept the same elements. Rank 0 keeps the one-device stream.
    if (rank > 0) {
      uint64_t z = pipert_context_random_state(ctx) ^
                   (0xD1B54A32D192ED03ull * static_cast<uint64_t>(rank));
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      pipert_context_set_random_state(ctx, z ^ (z >> 31));
    }
  }
  // Groups, made once by every rank in the same order (collective): the
  // replicas of this stage, and the ranks that compute a loss.
  pipert_comm *lossComm = nullptr;
  if (pipelines > 1) {
    replicaComm = pipert_comm_stage_group(ctx, pipelines, stagesPerPipeline);
    lossComm = pipert_comm_split(ctx, pipert_comm_world(ctx),
                                 info->has_loss ? 1 : 0, rank);
  }
  if (!o.trace.empty())
    pipert_trace_enable(ctx, rank);

  // Only a device whose program feeds graph inputs reads the data.
  pipert_npz *npz = nullptr;
  pipert_feeder *feeder = nullptr;
  if (info->n_inputs > 0) {
    npz = loadInputs(o.data, info);
    feeder = pipert_feeder_create(ctx, npz, info->batch, o.shuffle ? 1 : 0,
                                  o.seed);
  }
  // The evaluation data: its batches in order, B rows each (times the
  // pipelines, each of which evaluates its own), the last partial one left
  // out. Every rank of the job runs the same number of passes.
  pipert_npz *evalNpz = nullptr;
  pipert_feeder *evalFeeder = nullptr;
  int64_t evalRounds = 0, evalRows = 0;
  if (!o.evalData.empty()) {
    if (!info->eval)
      pipert_fail("--eval-data: this program has no evaluation pass (one compiled with "
                  "--forward-only has none; plan.json's \"eval\" says why): "
                  "drop --eval-data");
    if (info->n_inputs > 0) {
      evalNpz = loadInputs(o.evalData, info);
      evalFeeder = pipert_feeder_create(ctx, evalNpz, info->batch, 0, o.seed);
      evalRows = pipert_npz_shape(evalNpz, info->inputs[0].name)[0];
    }
    evalRounds = evalRows / (info->batch * pipelines);
    if (multi) {
      // Only the ranks that read data know the rows: their count, agreed.
      float counts[2] = {static_cast<float>(evalRounds), info->n_inputs > 0 ? 1.0f : 0.0f};
      float rowCount = static_cast<float>(evalRows);
      pipert_trace_pause(ctx, 1);
      void *buffer = pipert_alloc(ctx, 12);
      pipert_copy_to_device(ctx, buffer, counts, 8);
      pipert_copy_to_device(ctx, static_cast<char *>(buffer) + 8, &rowCount, 4);
      pipert_allreduce_f32(ctx, pipert_comm_world(ctx), static_cast<float *>(buffer), 3,
                           PIPERT_COLLECTIVE_SUM);
      float agreed[3];
      pipert_copy_to_host(ctx, agreed, buffer, 12);
      pipert_free(ctx, buffer);
      pipert_trace_pause(ctx, 0);
      if (agreed[1] > 0) {
        evalRounds = static_cast<int64_t>(agreed[0] / agreed[1] + 0.5f);
        evalRows = static_cast<int64_t>(agreed[2] / agreed[1] + 0.5f);
      }
    }
    if (evalRounds == 0)
      pipert_fail("--eval-data %s has %lld rows, fewer than one batch of %lld (the batch "
                  "pipe-compile was given%s): use more data or compile a smaller --batch",
                  o.evalData.c_str(), static_cast<long long>(evalRows),
                  static_cast<long long>(info->batch * pipelines),
                  pipelines > 1 ? ", times the pipelines" : "");
    if (o.evalBatches > 0)
      evalRounds = std::min(evalRounds, o.evalBatches);
  }
  std::vector<void *> inputs(info->n_inputs);
  for (int i = 0; i < info->n_inputs; ++i) {
    const pipert_tensor_info &t = info->inputs[i];
    // An input of every pipeline's batch: fed as P mini-batches of B rows.
    std::vector<int64_t> shape(t.shape, t.shape + t.ndim);
    if (t.kind == PIPERT_TENSOR_INPUT_PIPELINES) {
      if (t.ndim < 1 || shape[0] != info->batch * pipelines)
        pipert_fail("input '%s' of every pipeline has %lld rows, not %lld pipelines x %lld "
                    "(recompile: the program and the run disagree on the pipelines)",
                    t.name, static_cast<long long>(t.ndim < 1 ? 0 : shape[0]),
                    static_cast<long long>(pipelines), static_cast<long long>(info->batch));
      shape[0] = info->batch;
    }
    pipert_feeder_add_input(feeder, t.name, static_cast<pipert_dtype>(t.dtype),
                            t.ndim, shape.data());
    if (evalFeeder)
      pipert_feeder_add_input(evalFeeder, t.name, static_cast<pipert_dtype>(t.dtype),
                              t.ndim, shape.data());
    inputs[i] = pipert_alloc(ctx, static_cast<size_t>(tensorBytes(t)));
  }

  // Parameters and optimizer state: initial values, or the checkpoint's.
  std::vector<void *> persistent(info->n_persistent);
  std::vector<pipert_named_tensor> named(info->n_persistent);
  std::vector<pipert_named_tensor> params;
  for (int i = 0; i < info->n_persistent; ++i) {
    const pipert_tensor_info &t = info->persistent[i];
    size_t bytes = static_cast<size_t>(tensorBytes(t));
    persistent[i] = pipert_alloc(ctx, bytes);
    if (t.init && t.init_bytes == static_cast<int64_t>(bytes))
      pipert_copy_to_device(ctx, persistent[i], t.init, bytes);
    else
      pipert_memset_zero(ctx, persistent[i], bytes);
    named[i] = {t.name, static_cast<pipert_dtype>(t.dtype), t.ndim, t.shape,
                persistent[i]};
    if (t.kind == PIPERT_TENSOR_PARAM || t.kind == PIPERT_TENSOR_FROZEN)
      params.push_back(named[i]);
  }
  int64_t first = 0;
  if (!o.resume.empty()) {
    uint64_t rng = 0;
    int64_t saved = 0;
    char from[4096];
    pipert_checkpoint_resolve(o.resume.c_str(), from, sizeof from);
    if (pipert_checkpoint_load(ctx, from, rank, &saved, &rng,
                               named.data(), info->n_persistent) != 0) {
      // Every rank fails alike (a rank that started from step 0 while the
      // others resume would wait on them for ever).
      char path[4096];
      pipert_checkpoint_path(from, rank, path, sizeof path);
      pipert_fail("--resume %s: no checkpoint for device %d (%s is missing); "
                  "resume from a directory written by --checkpoint with this "
                  "compiled OUT, or leave --resume out to start at step 0",
                  o.resume.c_str(), info->device, path);
    }
    first = saved;
    pipert_context_set_random_state(ctx, rng);
  }

  // Under several ranks only the one that computes the loss logs (with
  // several pipelines, pipeline 0's, the mean over pipelines).
  pipert_log *log = nullptr;
  void *lossBuffer = lossComm && info->has_loss ? pipert_alloc(ctx, 4) : nullptr;
  if (!multi || (info->has_loss && pipeline == 0)) {
    if (first > 0) {
      pipert_log_drop_from(o.log.c_str(), first);
      // The interrupted run's evaluation after its last step was its final
      // one, not part of this run's log; any other of that step stays,
      // unless this run evaluates the checkpoint's model itself (it
      // resumes at its end, or a no-flush run at an --eval-every step).
      const bool reevaluates =
          !o.evalData.empty() &&
          (first >= o.steps || (info->drain_steps > 0 && o.evalEvery > 0 &&
                                first % o.evalEvery == 0));
      pipert_log_drop_eval(o.log.c_str(), first - 1, reevaluates ? 0 : 1);
    }
    log = pipert_log_open(o.log.c_str(), o.steps, info->batch,
                          first > 0 ? PIPERT_LOG_APPEND : PIPERT_LOG_TRUNCATE);
    if (o.quiet)
      pipert_log_set_progress(log, PIPERT_PROGRESS_OFF, 0);
  }
  runSteps = std::max<int64_t>(o.steps, first);
  if (first >= o.steps && rank == 0)
    std::fprintf(stderr,
                 "pipert: the checkpoint in %s is at step %lld, so --steps %lld runs no "
                 "step (--steps counts from step 0: give more to train on)\n",
                 o.resume.c_str(), static_cast<long long>(first),
                 static_cast<long long>(o.steps));
  // --on-nonfinite skip: every rank keeps its state from before the step and
  // puts it back when any rank's loss is not finite (a synchronous step is
  // then as if it never ran, optimizer counters included).
  if (o.onNonfinite == Options::Skip && info->drain_steps > 0)
    pipert_fail("--on-nonfinite skip undoes a step, which a no-flush method "
                "(its micro-batches span steps) does not have: use stop or warn");
  // A checkpoint of the state before step `step` (every rank's state at the
  // same step boundary): each rank saves into the step's directory, and
  // only when all have does LATEST name it (a rank that dies on the way
  // leaves the previous one). --checkpoint-every K writes one after every
  // K-th step too, the same as the final one: a no-flush program's
  // in-flight micro-batches are part of its persistent state, so a run
  // resumed from any of them continues the same trajectory.
  auto saveCheckpoint = [&](int64_t step) {
    pipert_synchronize(ctx);
    char stage[4096];
    pipert_checkpoint_stage_dir(o.checkpoint.c_str(), step, stage, sizeof stage);
    pipert_checkpoint_save(ctx, stage, rank, step, pipert_context_random_state(ctx),
                           named.data(), info->n_persistent);
    if (multi)
      pipert_barrier(ctx, pipert_comm_world(ctx));
    if (rank == 0)
      pipert_checkpoint_commit(o.checkpoint.c_str(), step);
    if (multi)
      pipert_barrier(ctx, pipert_comm_world(ctx));
    pipert_checkpoint_prune(o.checkpoint.c_str(), rank);
  };
  std::vector<void *> backup;
  if (o.onNonfinite == Options::Skip)
    for (int i = 0; i < info->n_persistent; ++i)
      backup.push_back(pipert_alloc(ctx, static_cast<size_t>(tensorBytes(info->persistent[i]))));
  void *flagBuffer = multi && o.onNonfinite == Options::Skip ? pipert_alloc(ctx, 4) : nullptr;
  int64_t skipped = 0, warned = 0;
  const bool computesLoss = !multi || info->has_loss;
  // Global mini-batch s*P + i for pipeline i (its inputs), or every
  // pipeline's (an input of all of them), from `from`.
  auto fill = [&](pipert_feeder *from, int64_t s) {
    for (int i = 0; i < info->n_inputs; ++i) {
      if (info->inputs[i].kind == PIPERT_TENSOR_INPUT_PIPELINES) {
        // Every pipeline's mini-batch of step s, pipeline 0's first.
        const size_t bytes = static_cast<size_t>(tensorBytes(info->inputs[i]) / pipelines);
        for (int j = 0; j < pipelines; ++j)
          pipert_feeder_fill(from, s * pipelines + j, i,
                             static_cast<char *>(inputs[i]) + j * bytes);
        continue;
      }
      pipert_feeder_fill(from, s * pipelines + pipeline, i, inputs[i]);
    }
  };
  // The evaluation pass after `done` steps: the mean of the batches' mean
  // losses (each pipeline's own batches; their mean as the step's loss is).
  // It changes no persistent buffer and draws no random number, so the
  // training continues as without it; it is not in the trace.
  double evalSeconds = 0, evalWaited = 0; // not part of the training's report
  // Several pipelines evaluate the model --save writes: pipeline 0's
  // parameters and state (data-parallel replicas keep their own
  // BatchNormalization statistics), copied for the evaluation only.
  std::vector<void *> evalPersistent = persistent, evalCopies;
  std::vector<int> evalShared;
  if (evalRounds > 0 && pipelines > 1)
    for (int i = 0; i < info->n_persistent; ++i) {
      const pipert_tensor_info &t = info->persistent[i];
      if ((t.kind != PIPERT_TENSOR_PARAM && t.kind != PIPERT_TENSOR_FROZEN) ||
          t.dtype != PIPERT_F32)
        continue;
      evalPersistent[i] = pipert_alloc(ctx, static_cast<size_t>(tensorBytes(t)));
      evalCopies.push_back(evalPersistent[i]);
      evalShared.push_back(i);
    }
  // The counts the evaluation writes after its loss (the accuracy's).
  if (info->eval && (info->eval_metrics < 0 || info->eval_metrics > kMaxEvalMetrics))
    pipert_fail("the program's evaluation writes %d counts; this runtime reads at most %d "
                "(recompile it with this pipec)",
                info->eval_metrics, kMaxEvalMetrics);
  const int evalMetrics = info->eval ? info->eval_metrics : 0;
  void *countBuffer =
      lossBuffer && evalMetrics > 0 ? pipert_alloc(ctx, 4 * static_cast<size_t>(evalMetrics))
                                    : nullptr;
  auto evaluate = [&](int64_t done, int64_t logStep, bool final) {
    const auto begin = std::chrono::steady_clock::now();
    const double waitedBefore = pipert_transport_wait_seconds();
    pipert_trace_pause(ctx, 1);
    for (int i : evalShared) {
      // Pipeline 0's values: the sum over the replicas of them and zeros.
      const size_t bytes = static_cast<size_t>(tensorBytes(info->persistent[i]));
      if (pipeline == 0)
        pipert_copy_device(ctx, evalPersistent[i], persistent[i], bytes);
      else
        pipert_memset_zero(ctx, evalPersistent[i], bytes);
      pipert_allreduce_f32(ctx, replicaComm, static_cast<float *>(evalPersistent[i]),
                           static_cast<int64_t>(bytes / 4), PIPERT_COLLECTIVE_SUM);
    }
    double sum = 0;
    int64_t correct = 0, labels = 0;
    for (int64_t j = 0; j < evalRounds; ++j) {
      fill(evalFeeder, j);
      // The loss, then the program's counts (exact integers in f32: a
      // batch's labels are far fewer than 2^24).
      float out[1 + kMaxEvalMetrics] = {};
      info->eval(ctx, inputs.data(), evalPersistent.data(), out, done);
      if (lossBuffer) {
        pipert_copy_to_device(ctx, lossBuffer, out, 4);
        pipert_allreduce_f32(ctx, lossComm, static_cast<float *>(lossBuffer), 1,
                             PIPERT_COLLECTIVE_MEAN);
        pipert_copy_to_host(ctx, out, lossBuffer, 4);
        if (evalMetrics > 0) {
          // The pipelines' counts add up.
          pipert_copy_to_device(ctx, countBuffer, out + 1, 4 * evalMetrics);
          pipert_allreduce_f32(ctx, lossComm, static_cast<float *>(countBuffer),
                               evalMetrics, PIPERT_COLLECTIVE_SUM);
          pipert_copy_to_host(ctx, out + 1, countBuffer, 4 * evalMetrics);
        }
      }
      sum += out[0];
      if (evalMetrics >= 2) {
        correct += static_cast<int64_t>(std::llround(out[1]));
        labels += static_cast<int64_t>(std::llround(out[2]));
      }
    }
    pipert_trace_pause(ctx, 0);
    evalSeconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    evalWaited += pipert_transport_wait_seconds() - waitedBefore;
    if (log)
      pipert_log_eval(log, logStep, sum / static_cast<double>(evalRounds),
                      evalRounds * info->batch * pipelines, final ? 1 : 0,
                      evalMetrics >= 2 ? labels : -1, correct);
  };
  bool evaluatedLast = false;
  // A no-flush run resumed at an --eval-every step: the evaluation between
  // that step and the next, which the interrupted run left to its drain,
  // on the checkpoint's newest weights.
  if (evalRounds > 0 && info->drain_steps > 0 && o.evalEvery > 0 && first > 0 &&
      first < o.steps && first % o.evalEvery == 0)
    evaluate(first, first - 1, false);
  const double waitBefore = pipert_transport_wait_seconds();
  const auto loopStart = std::chrono::steady_clock::now();
  for (int64_t s = first; s < o.steps; ++s) {
    for (size_t i = 0; i < backup.size(); ++i)
      pipert_copy_device(ctx, backup[i], persistent[i],
                         static_cast<size_t>(tensorBytes(info->persistent[i])));
    // Pipeline i reads the global mini-batch s*P + i.
    fill(feeder, s);
    float loss = 0.0f;
    double begin = pipert_trace_begin(ctx);
    info->step(ctx, inputs.data(), persistent.data(), &loss, s);
    pipert_trace_end(ctx, "step", "step", begin, PIPERT_TRACE_TID_COMPUTE);
    if (lossBuffer) {
      pipert_copy_to_device(ctx, lossBuffer, &loss, 4);
      pipert_allreduce_f32(ctx, lossComm, static_cast<float *>(lossBuffer), 1,
                           PIPERT_COLLECTIVE_MEAN);
      pipert_copy_to_host(ctx, &loss, lossBuffer, 4);
    }
    if (log)
      pipert_log_step(log, s, loss, 0, nullptr, nullptr);
    const bool nonfinite = computesLoss && !std::isfinite(loss);
    if (o.onNonfinite == Options::Skip) {
      float flag = nonfinite ? 1.0f : 0.0f;
      if (flagBuffer) {
        pipert_copy_to_device(ctx, flagBuffer, &flag, 4);
        pipert_allreduce_f32(ctx, pipert_comm_world(ctx),
                             static_cast<float *>(flagBuffer), 1,
                             PIPERT_COLLECTIVE_SUM);
        pipert_copy_to_host(ctx, &flag, flagBuffer, 4);
      }
      if (flag > 0) {
        for (size_t i = 0; i < backup.size(); ++i)
          pipert_copy_device(ctx, persistent[i], backup[i],
                             static_cast<size_t>(tensorBytes(info->persistent[i])));
        ++skipped;
        if (log)
          std::fprintf(stderr, "%spipert: warning: step %lld: the loss is %s; "
                       "its update is skipped (--on-nonfinite skip)\n",
                       o.quiet ? "" : "\n", static_cast<long long>(s),
                       std::isnan(loss) ? "nan" : "infinite");
      }
    } else if (nonfinite) {
      std::string where = describeNonfinite(
          ctx, info, persistent, multi ? rank % stagesPerPipeline : -1);
      if (o.onNonfinite == Options::Stop)
        pipert_fail("step %lld: the loss is %s; %s; stopping (--on-nonfinite "
                    "skip or warn goes on)",
                    static_cast<long long>(s), std::isnan(loss) ? "nan" : "infinite",
                    where.c_str());
      ++warned;
      std::fprintf(stderr, "%spipert: warning: step %lld: the loss is %s; %s\n",
                   o.quiet ? "" : "\n", static_cast<long long>(s),
                   std::isnan(loss) ? "nan" : "infinite", where.c_str());
    }
    if (o.checkpointEvery > 0 && (s + 1) % o.checkpointEvery == 0 && s + 1 < o.steps)
      saveCheckpoint(s + 1);
    // A no-flush run's last evaluation is the one after its drain.
    evaluatedLast = false;
    if (evalRounds > 0 && o.evalEvery > 0 && (s + 1) % o.evalEvery == 0 &&
        !(info->drain_steps > 0 && s + 1 == o.steps)) {
      evaluate(s + 1, s, false);
      evaluatedLast = true;
    }
  }
  // And after the last step (also of a run resumed at its end: the
  // checkpoint's model); a no-flush program's after the drain has finished
  // the micro-batches in flight: the model --save writes.
  const bool finalEval = evalRounds > 0 && !evaluatedLast;
  const int64_t lastStep = std::max(o.steps, first) - 1;
  if (finalEval && info->drain_steps == 0)
    evaluate(lastStep + 1, lastStep, true);
  if (log && (skipped || warned))
    std::fprintf(stderr, "pipert: %lld of %lld steps had a non-finite loss%s\n",
                 static_cast<long long>(skipped + warned),
                 static_cast<long long>(o.steps - first),
                 skipped ? " (their updates skipped)" : "");
  pipert_synchronize(ctx);
  const double loopSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - loopStart).count() -
      evalSeconds;
  const double waited = pipert_transport_wait_seconds() - waitBefore - evalWaited;
  for (void *p : backup)
    pipert_free(ctx, p);
  if (flagBuffer)
    pipert_free(ctx, flagBuffer);
  pipert_synchronize(ctx);
  if (!finalEval || info->drain_steps == 0) {
    pipert_log_close(log);
    log = nullptr;
  }

  // A no-flush program's state after the last step includes what is in
  // flight: the checkpoint holds it, so a resumed run continues the same
  // trajectory; only then does the drain finish the micro-batches.
  // Every rank saves into the step's directory; only when all have does
  // LATEST name it (a rank that dies on the way leaves the previous one).
  if (!o.checkpoint.empty())
    saveCheckpoint(runSteps);
  // The final report: throughput, each device's busy fraction (the part of
  // the run it did not spend waiting for transfers), the checkpoint.
  {
    // Per device: busy fraction, then peak memory in MiB.
    const size_t n = static_cast<size_t>(info->n_devices);
    std::vector<float> busy(2 * n, 0.0f);
    busy[static_cast<size_t>(rank)] =
        loopSeconds > 0 ? static_cast<float>(1.0 - waited / loopSeconds) : 1.0f;
    busy[n + static_cast<size_t>(rank)] =
        static_cast<float>(static_cast<double>(pipert_peak_memory_bytes()) / (1 << 20));
    if (multi) {
      void *buffer = pipert_alloc(ctx, busy.size() * 4);
      pipert_copy_to_device(ctx, buffer, busy.data(), busy.size() * 4);
      pipert_allreduce_f32(ctx, pipert_comm_world(ctx), static_cast<float *>(buffer),
                           static_cast<int64_t>(busy.size()), PIPERT_COLLECTIVE_SUM);
      pipert_copy_to_host(ctx, busy.data(), buffer, busy.size() * 4);
      pipert_free(ctx, buffer);
    }
    const int64_t ran = o.steps - first;
    if (rank == 0 && !o.quiet && ran > 0) {
      std::string devices, memory;
      char mib[32];
      for (size_t d = 0; d < n; ++d) {
        devices += (d ? ", " : "") + std::to_string(d) + ": " +
                   std::to_string(static_cast<int>(busy[d] * 100.0f + 0.5f)) + "%";
        if (busy[n + d] >= 1.0f)
          std::snprintf(mib, sizeof mib, "%.1f MiB", busy[n + d]);
        else
          std::snprintf(mib, sizeof mib, "%.0f KiB", busy[n + d] * 1024.0f);
        memory += (d ? ", " : "") + std::to_string(d) + ": " + mib;
      }
      // Which path the messages between ranks took (rank 0's machine).
      std::string path;
      if (n > 1) {
        const int64_t ring = pipert_comm_ring_bytes();
        path = ring > 0 ? "; messages between ranks: shared-memory rings up to " +
                              std::to_string(ring / 4 / 1024) + " KiB, MPI above"
                        : std::string("; messages between ranks: MPI");
      }
      std::fprintf(stderr,
                   "pipert: %lld steps in %.2f s, %.1f samples/s; busy per device "
                   "(not waiting for transfers): %s; peak memory per device: %s%s%s%s\n",
                   static_cast<long long>(ran), loopSeconds,
                   static_cast<double>(ran) * static_cast<double>(info->batch) * pipelines /
                       std::max(loopSeconds, 1e-9),
                   devices.c_str(), memory.c_str(), o.checkpoint.empty() ? "" : "; checkpoint ",
                   o.checkpoint.c_str(), path.c_str());
    }
  }
  for (int64_t s = runSteps; s < runSteps + info->drain_steps; ++s) {
    float ignored = 0.0f;
    double begin = pipert_trace_begin(ctx);
    info->step(ctx, inputs.data(), persistent.data(), &ignored, s);
    pipert_trace_end(ctx, "drain", "step", begin, PIPERT_TRACE_TID_COMPUTE);
  }
  if (info->finish) {
    float ignored = 0.0f;
    info->finish(ctx, inputs.data(), persistent.data(), &ignored, runSteps);
  }
  if (finalEval && info->drain_steps > 0) {
    evaluate(runSteps + info->drain_steps, lastStep, true);
    pipert_log_close(log);
    log = nullptr;
  }
  pipert_synchronize(ctx);
  if (!o.save.empty()) {
    if (!info->model_file)
      pipert_fail("--save: this program does not know its ONNX model");
    std::vector<GatheredTensor> gathered;
    // Pipeline 0's ranks hold one copy of every stage.
    if (multi && pipeline == 0)
      gatherParameters(ctx, rank, stagesPerPipeline, params, gathered);
    if (rank == 0) {
      std::vector<pipert_named_tensor> all = params;
      for (const GatheredTensor &t : gathered)
        all.push_back({t.name.c_str(), static_cast<pipert_dtype>(t.dtype),
                       static_cast<int>(t.shape.size()), t.shape.data(),
                       t.data});
      std::string model = info->model_file;
      if (model[0] != '/')
        model = executableDir() + "/" + model;
      pipert_export_onnx(ctx, model.c_str(), o.save.c_str(), all.data(),
                         static_cast<int>(all.size()));
    }
    for (GatheredTensor &t : gathered)
      pipert_free(ctx, t.data);
  }
  if (!o.trace.empty() && !multi && pipert_trace_write(ctx, o.trace.c_str()) != 0)
    pipert_fail("--trace: cannot write %s: %s", o.trace.c_str(),
                std::strerror(errno));
  if (!o.trace.empty() && multi) {
    // One track per device: every rank writes its part, rank 0 merges them.
    std::string part = o.trace + ".rank" + std::to_string(rank);
    if (pipert_trace_write(ctx, part.c_str()) != 0)
      pipert_fail("--trace: cannot write %s: %s", part.c_str(),
                  std::strerror(errno));
    pipert_barrier(ctx, pipert_comm_world(ctx));
    if (rank == 0) {
      std::vector<std::string> parts;
      std::vector<const char *> names;
      for (int r = 0; r < info->n_devices; ++r)
        parts.push_back(o.trace + ".rank" + std::to_string(r));
      for (const std::string &p : parts)
        names.push_back(p.c_str());
      char err[512] = {0};
      if (pipert_trace_merge(names.data(), static_cast<int>(names.size()),
                             o.trace.c_str(), err, sizeof err) != 0)
        pipert_fail("--trace: cannot merge the ranks' traces: %s", err);
      for (const std::string &p : parts)
        std::remove(p.c_str());
    }
  }

  for (void *p : inputs)
    pipert_free(ctx, p);
  for (void *p : persistent)
    pipert_free(ctx, p);
  if (feeder)
    pipert_feeder_destroy(feeder);
  if (npz)
    pipert_npz_free(npz);
  if (evalFeeder)
    pipert_feeder_destroy(evalFeeder);
  for (void *p : evalCopies)
    pipert_free(ctx, p);
  if (evalNpz)
    pipert_npz_free(evalNpz);
  if (lossBuffer)
    pipert_free(ctx, lossBuffer);
  if (countBuffer)
    pipert_free(ctx, countBuffer);
  if (lossComm)
    pipert_comm_destroy(ctx, lossComm);
  if (replicaComm)
    pipert_comm_destroy(ctx, replicaComm);
  replicaComm = nullptr;
  if (pipelineComm)
    pipert_comm_destroy(ctx, pipelineComm);
  pipelineComm = nullptr;
  if (multi)
    pipert_comm_finalize(ctx);
  pipert_context_destroy(ctx);
  return 0;
}
