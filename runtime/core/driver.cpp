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
#include "pipert/pipert_data.h"
#include "pipert/pipert_log.h"
#include "pipert/pipert_trace.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

struct Options {
  std::string data, log, save, checkpoint, resume, trace;
  int64_t steps = -1;
  uint64_t seed = 0;
  bool shuffle = true;
  bool quiet = false;
  int threads = 0;
};

int usageError(const char *fmt, const char *what) {
  std::fprintf(stderr, "pipert: error: ");
  std::fprintf(stderr, fmt, what);
  std::fprintf(stderr, "\n");
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
      dst = argv[++i];
      return true;
    };
    std::string text;
    if (a == "--no-shuffle") {
      o.shuffle = false;
    } else if (a == "--quiet") {
      o.quiet = true;
    } else if (a == "--data" || a == "--log" || a == "--save" ||
               a == "--checkpoint" || a == "--resume" || a == "--trace") {
      std::string &dst = a == "--data" ? o.data
                         : a == "--log" ? o.log
                         : a == "--save" ? o.save
                         : a == "--checkpoint" ? o.checkpoint
                         : a == "--resume" ? o.resume
                                           : o.trace;
      if (!value(dst))
        return usageError("option %s needs a value", a.c_str());
    } else if (a == "--steps" || a == "--seed" || a == "--threads") {
      int64_t v;
      if (!value(text) || !parseInt(text.c_str(), v) || v < 0)
        return usageError("option %s needs a non-negative integer", a.c_str());
      if (a == "--steps")
        o.steps = v;
      else if (a == "--seed")
        o.seed = static_cast<uint64_t>(v);
      else
        o.threads = static_cast<int>(v);
    } else {
      return usageError("unknown option '%s' (--data --steps --no-shuffle "
                        "--seed --log --save --checkpoint --resume --trace "
                        "--threads --quiet)",
                        a.c_str());
    }
  }
  if (o.data.empty())
    return usageError("%s", "--data D.npz is required");
  if (o.steps < 0)
    return usageError("%s", "--steps K is required");
  return 0;
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
void checkData(const pipert_npz *npz, const Options &o,
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
                  o.data.c_str(), t.name, names.c_str());
    pipert_dtype dtype = pipert_npz_dtype(npz, t.name);
    if (dtype != t.dtype)
      pipert_fail("%s: array '%s' is %s, but the model's input '%s' is %s",
                  o.data.c_str(), t.name, pipert_dtype_name(dtype), t.name,
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
                  o.data.c_str(), t.name, shapeText(ndim, shape).c_str(),
                  t.name, expect.c_str());
    }
    if (rows >= 0 && shape[0] != rows)
      pipert_fail("%s: arrays '%s' and '%s' have different numbers of "
                  "samples (%lld and %lld)",
                  o.data.c_str(), firstName.c_str(), t.name, (long long)rows,
                  (long long)shape[0]);
    if (rows < 0) {
      rows = shape[0];
      firstName = t.name;
    }
  }
  if (rows == 0)
    pipert_fail("%s: the data has no samples", o.data.c_str());
}

} // namespace

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

  pipert_context *ctx = pipert_context_create(o.threads, o.seed);
  if (!o.trace.empty())
    pipert_trace_enable(ctx, 0);

  pipert_npz *npz = pipert_npz_load(o.data.c_str());
  checkData(npz, o, info);
  pipert_feeder *feeder =
      pipert_feeder_create(ctx, npz, info->batch, o.shuffle ? 1 : 0, o.seed);
  std::vector<void *> inputs(info->n_inputs);
  for (int i = 0; i < info->n_inputs; ++i) {
    const pipert_tensor_info &t = info->inputs[i];
    pipert_feeder_add_input(feeder, t.name, static_cast<pipert_dtype>(t.dtype),
                            t.ndim, t.shape);
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
    if (pipert_checkpoint_load(ctx, o.resume.c_str(), 0, &saved, &rng,
                               named.data(), info->n_persistent) == 0) {
      first = saved;
      pipert_context_set_random_state(ctx, rng);
    }
  }

  pipert_log *log = pipert_log_open(o.log.c_str(), o.steps, info->batch,
                                    first > 0 ? PIPERT_LOG_APPEND
                                              : PIPERT_LOG_TRUNCATE);
  if (o.quiet)
    pipert_log_set_progress(log, PIPERT_PROGRESS_OFF, 0);
  for (int64_t s = first; s < o.steps; ++s) {
    for (int i = 0; i < info->n_inputs; ++i)
      pipert_feeder_fill(feeder, s, i, inputs[i]);
    float loss = 0.0f;
    double begin = pipert_trace_begin(ctx);
    info->step(ctx, inputs.data(), persistent.data(), &loss, s);
    pipert_trace_end(ctx, "step", "step", begin, PIPERT_TRACE_TID_COMPUTE);
    pipert_log_step(log, s, loss, 0, nullptr, nullptr);
  }
  pipert_synchronize(ctx);
  pipert_log_close(log);

  if (!o.checkpoint.empty())
    pipert_checkpoint_save(ctx, o.checkpoint.c_str(), 0,
                           std::max<int64_t>(o.steps, first),
                           pipert_context_random_state(ctx), named.data(),
                           info->n_persistent);
  if (!o.save.empty()) {
    if (!info->model_file)
      pipert_fail("--save: this program does not know its ONNX model");
    std::string model = info->model_file;
    if (model[0] != '/')
      model = executableDir() + "/" + model;
    pipert_export_onnx(ctx, model.c_str(), o.save.c_str(), params.data(),
                       static_cast<int>(params.size()));
  }
  if (!o.trace.empty() && pipert_trace_write(ctx, o.trace.c_str()) != 0)
    pipert_fail("--trace: cannot write %s: %s", o.trace.c_str(),
                std::strerror(errno));

  for (void *p : inputs)
    pipert_free(ctx, p);
  for (void *p : persistent)
    pipert_free(ctx, p);
  pipert_feeder_destroy(feeder);
  pipert_npz_free(npz);
  pipert_context_destroy(ctx);
  return 0;
}
