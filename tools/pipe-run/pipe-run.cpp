//===- pipe-run.cpp - runs the executables pipe-compile wrote -------------===//
//
//   pipe-run OUT --data D.npz --steps K [--no-shuffle] [--seed S]
//            [--log steps.jsonl] [--save trained.onnx] [--trace t.json]
//            [--checkpoint DIR [--checkpoint-every K]] [--resume DIR] [--threads N]
//
// One device: runs OUT/device0 in place of this process. Several devices
// (OUT/plan.json says "devices": N > 1): one MPI rank per executable, MPMD
// under mpirun (rank k runs OUT/device<k>), every rank with the same flags:
//   mpirun --oversubscribe [--allow-run-as-root] --mca btl self,vader
//          --mca btl_vader_single_copy_mechanism cma|none
//          --mca btl_vader_eager_limit 32768
//          -np 1 OUT/device0 FLAGS : -np 1 OUT/device1 FLAGS ...
// (cma where this machine lets a process read another's memory, probed:
// tools/common/MpiFlags.h; PIPEC_SINGLE_COPY=cma|none chooses).
// PIPEC_MPIRUN names another mpirun; PIPEC_MPIRUN_FLAGS (split at spaces)
// replaces the options before the first -np.
//
//===----------------------------------------------------------------------===//
#include "LossPlot.h"
#include "../common/MpiFlags.h"
#include "pipec/Support/Version.h"
#include "pipec/Target/PlanVersion.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/xxhash.h"

#include "pipert/pipert_data.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cmath>
#include <optional>
#include <fstream>
#include <sstream>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <strings.h>
#include <string>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sched.h>
#include <unistd.h>
#include <vector>

namespace {

/// What is wrong with the runtime's environment variables (empty: nothing).
/// The same rules as the runtime applies where it reads them (context.cpp,
/// linalg.cpp, mpi_comm.cpp; PIPEC_SINGLE_COPY in tools/common).
std::string checkEnvironment() {
  auto integer = [](const char *text, long long &v) {
    char *end = nullptr;
    errno = 0;
    v = std::strtoll(text, &end, 10);
    return end != text && *end == '\0' && errno == 0;
  };
  long long v = 0;
  if (const char *e = std::getenv("PIPERT_THREADS"); e && (!integer(e, v) || v < 1))
    return std::string("PIPERT_THREADS='") + e +
           "' is not a thread count >= 1 (kernel threads per rank; unset it for the "
           "default, the cores shared among the ranks)";
  if (const char *e = std::getenv("PIPERT_SHM"); e && std::strcmp(e, "0") && std::strcmp(e, "1"))
    return std::string("PIPERT_SHM='") + e +
           "' is not 0 or 1 (1, the default: small messages through shared-memory "
           "rings; 0: all through MPI)";
  if (const char *e = std::getenv("PIPERT_SHM_RING");
      e && (!integer(e, v) || v < (64LL << 10) || v > (1LL << 30) || (v & (v - 1))))
    return std::string("PIPERT_SHM_RING='") + e +
           "' is not a power of two of bytes in [65536, 1073741824] (the size of each "
           "shared-memory ring between two ranks)";
  if (const char *e = std::getenv("PIPERT_SEND_BUFFER"); e && (!integer(e, v) || v < 0))
    return std::string("PIPERT_SEND_BUFFER='") + e +
           "' is not a byte count >= 0 (0: sends wait for the receiver)";
  if (const char *e = std::getenv("PIPERT_TIMEOUT_S")) {
    char *end = nullptr;
    double t = std::strtod(e, &end);
    if (end == e || *end != '\0' || !(t > 0))
      return std::string("PIPERT_TIMEOUT_S='") + e + "' is not a positive number of seconds";
  }
  if (const char *e = std::getenv("PIPEC_SINGLE_COPY");
      e && std::strcmp(e, "cma") && std::strcmp(e, "none"))
    return std::string("PIPEC_SINGLE_COPY='") + e +
           "' is not cma or none (unset: cma where this machine allows it)";
  if (const char *e = std::getenv("PIPERT_GEMM");
      e && *e && std::strcmp(e, "auto") && std::strcmp(e, "onednn") &&
      std::strcmp(e, "openblas") && std::strcmp(e, "small"))
    return std::string("PIPERT_GEMM='") + e + "' is not onednn, openblas, small or auto";
  return "";
}

int fail(const std::string &message) {
  std::fprintf(stderr, "pipe-run: error: %s\n", message.c_str());
  return 2;
}

bool isExecutable(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         access(path.c_str(), X_OK) == 0;
}

const char *const kValueOptions[] = {"--data", "--steps", "--seed", "--log",
                                     "--save", "--trace", "--checkpoint",
                                     "--checkpoint-every", "--resume", "--threads",
                                     "--on-nonfinite", "--plot", "--eval-data",
                                     "--eval-every", "--eval-batches"};
const char *const kFlagOptions[] = {"--no-shuffle", "--quiet"};

const char *dtypeName(int64_t code) {
  switch (code) {
  case 1: return "float32";
  case 2: return "uint8";
  case 3: return "int8";
  case 6: return "int32";
  case 7: return "int64";
  case 9: return "bool";
  case 10: return "float16";
  case 11: return "float64";
  default: return "an unsupported type";
  }
}

std::string shapeText(const int64_t *shape, int ndim, bool samples) {
  std::string text = "(";
  for (int d = 0; d < ndim; ++d) {
    if (d)
      text += ", ";
    text += samples && d == 0 ? std::string("N") : std::to_string(shape[d]);
  }
  return text + (ndim == 1 ? ",)" : ")");
}

/// The first element of `count` that is not finite, or -1.
template <typename T> int64_t firstNonFinite(const void *data, int64_t count) {
  const T *x = static_cast<const T *>(data);
  for (int64_t i = 0; i < count; ++i)
    if (!std::isfinite(x[i]))
      return i;
  return -1;
}

/// Checks the data file against plan.json's "data" (what the model's inputs
/// need) before anything starts: "" when it is fine, else the one line to
/// print. `rowsPerStep` is the batch times the pipelines; `microbatches`
/// and `pipelines` the plan's (a mean loss with ignored labels averages
/// their losses unless the plan says its mean is the step's).
std::string checkData(const std::string &path, const llvm::json::Array &spec,
                      int64_t rowsPerStep, int64_t microbatches, int64_t pipelines,
                      const std::string &flag = "--data") {
  struct stat st;
  if (stat(path.c_str(), &st) != 0)
    return flag + " " + path + ": no such file";
  if (!S_ISREG(st.st_mode))
    return flag + " " + path + ": " +
           (S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file") +
           " (give the .npz file np.savez wrote)";
  // Only the arrays the plan reads are copied out of the (mapped) file.
  std::vector<std::string> wanted;
  for (const llvm::json::Value &v : spec)
    if (auto name = v.getAsObject()->getString("name"))
      wanted.push_back(name->str());
  std::vector<const char *> wantedNames;
  for (const std::string &w : wanted)
    wantedNames.push_back(w.c_str());
  pipert_npz *npz =
      pipert_npz_load_arrays(path.c_str(), wantedNames.data(), int(wantedNames.size()));
  std::string inputs;
  for (const llvm::json::Value &v : spec)
    if (auto name = v.getAsObject()->getString("name"))
      inputs += (inputs.empty() ? "" : ", ") + name->str();
  int64_t rows = -1;
  std::string rowsOf;
  std::string problem;
  for (const llvm::json::Value &v : spec) {
    const llvm::json::Object &entry = *v.getAsObject();
    std::string name = entry.getString("name").value_or("").str();
    if (pipert_npz_find(npz, name.c_str()) < 0) {
      problem = path + " has no array '" + name + "' (the model's inputs: " +
                inputs + ")";
      break;
    }
    int64_t dtype = pipert_npz_dtype(npz, name.c_str());
    int64_t want = entry.getInteger("dtype").value_or(dtype);
    int ndim = pipert_npz_ndim(npz, name.c_str());
    const int64_t *shape = pipert_npz_shape(npz, name.c_str());
    if (dtype != want) {
      problem = path + ": array '" + name + "' is " + dtypeName(dtype) +
                ", but the model's input '" + name + "' is " + dtypeName(want);
      break;
    }
    std::vector<int64_t> sample;
    if (const llvm::json::Array *dims = entry.getArray("sample_shape"))
      for (const llvm::json::Value &d : *dims)
        sample.push_back(d.getAsInteger().value_or(-1));
    bool same = ndim == int(sample.size()) + 1;
    for (size_t d = 0; same && d < sample.size(); ++d)
      same = shape[d + 1] == sample[d];
    if (!same) {
      std::vector<int64_t> needed = {0};
      needed.insert(needed.end(), sample.begin(), sample.end());
      problem = path + ": array '" + name + "' has shape " +
                shapeText(shape, ndim, false) + ", but the model's input '" +
                name + "' needs samples of shape " +
                shapeText(needed.data(), int(needed.size()), true);
      break;
    }
    if (rows >= 0 && shape[0] != rows) {
      problem = path + ": array '" + name + "' has " + std::to_string(shape[0]) +
                " rows, but '" + rowsOf + "' has " + std::to_string(rows) +
                " (one row per sample in every array)";
      break;
    }
    rows = shape[0];
    rowsOf = name;
    int64_t perRow = 1;
    for (int64_t d : sample)
      perRow *= d;
    int64_t count = rows * perRow;
    const void *data = pipert_npz_data(npz, name.c_str(), static_cast<pipert_dtype>(dtype), -1,
                                       nullptr);
    int64_t bad = dtype == 1    ? firstNonFinite<float>(data, count)
                  : dtype == 11 ? firstNonFinite<double>(data, count)
                                : -1;
    if (bad >= 0) {
      problem = path + ": array '" + name + "' has a NaN or infinity at row " +
                std::to_string(perRow ? bad / perRow : 0) +
                (flag == "--data" ? " (training on it gives non-finite losses; clean the data)"
                                  : " (evaluating on it gives non-finite losses; clean the data)");
      break;
    }
    // Token ids and other indices a Gather reads: within its table. (ONNX
    // would take -n .. -1 from the end; torch's nn.Embedding refuses them,
    // and in data they are an error.)
    if (std::optional<int64_t> extent = entry.getInteger("index_extent");
        extent && (dtype == 7 || dtype == 6)) {
      for (int64_t i = 0; i < count; ++i) {
        int64_t index = dtype == 7 ? static_cast<const int64_t *>(data)[i]
                                   : static_cast<const int32_t *>(data)[i];
        if (index < 0 || index >= *extent) {
          problem = path + ": array '" + name + "' has index " + std::to_string(index) +
                    " at row " + std::to_string(perRow ? i / perRow : 0) + ", outside [0, " +
                    std::to_string(*extent) + ") (the table it indexes, an embedding say, has " +
                    std::to_string(*extent) + " rows)";
          break;
        }
      }
      if (!problem.empty())
        break;
    }
    std::optional<int64_t> classes = entry.getInteger("classes");
    if (classes && (dtype == 7 || dtype == 6)) {
      std::optional<int64_t> ignore = entry.getInteger("ignore_index");
      std::optional<llvm::StringRef> reduction = entry.getString("loss_reduction");
      // The means a step averages: none where the plan takes the mean over
      // the step's counted labels (of every data-parallel pipeline; an
      // AvgPipe pipeline's over its own), else the micro-batches' and the
      // pipelines'.
      std::optional<llvm::StringRef> lossMean = entry.getString("loss_mean");
      const int64_t averaged =
          lossMean && *lossMean == "step" ? 1 : microbatches * pipelines;
      const bool splitMean = averaged > 1 && reduction && *reduction == "mean";
      for (int64_t i = 0; i < count; ++i) {
        int64_t label = dtype == 7 ? static_cast<const int64_t *>(data)[i]
                                   : static_cast<const int32_t *>(data)[i];
        if (splitMean && ignore && label == *ignore) {
          // The step's loss is the mean over its counted labels, but a
          // pipeline averages the M micro-batches' means: equal only where
          // each micro-batch counts as many labels.
          problem = path + ": array '" + name + "' has the ignored label " +
                    std::to_string(label) + " at row " +
                    std::to_string(perRow ? i / perRow : 0) + ", but this plan averages " +
                    std::to_string(averaged) +
                    (pipelines > 1 ? " pipeline and micro-batch losses" : " micro-batch losses") +
                    ", which with ignored labels is not the mean over the counted ones: " +
                    (pipelines > 1 ? "compile with --microbatches 1 --pipelines 1"
                                   : "compile with --microbatches 1 (one pipeline)") +
                    ", or leave such rows out";
          break;
        }
        if ((label < 0 || label >= *classes) && label != ignore) {
          problem = path + ": array '" + name + "' has label " +
                    std::to_string(label) + " at row " +
                    std::to_string(perRow ? i / perRow : 0) + ", outside [0, " +
                    std::to_string(*classes) + ") (the loss has " +
                    std::to_string(*classes) + " classes)";
          break;
        }
      }
      if (!problem.empty())
        break;
    }
  }
  if (problem.empty() && rows >= 0 && rows < rowsPerStep)
    problem = flag + " " + path + " has " + std::to_string(rows) +
              " rows, fewer than one step's " + std::to_string(rowsPerStep) +
              " (the batch pipe-compile was given, times the pipelines; use "
              "more data or compile a smaller --batch)";
  pipert_npz_free(npz);
  return problem;
}

/// mpirun's stderr as the user should see it: the ranks' own lines (their
/// errors, "pipert: error: rank 1: ...", and progress) pass through; Open
/// MPI's boxed help texts that only repeat that a rank failed (MPI_ABORT,
/// "Primary job terminated ...") and its ORTE_ERROR_LOG lines are dropped; a
/// rank that died of a signal becomes one line naming it. Boxes it does not
/// know (mpirun cannot start, say) pass through unchanged.
class StderrFilter {
public:
  explicit StderrFilter(std::vector<std::string> devices)
      : devices(std::move(devices)) {}
  void feed(const char *data, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      pending += data[i];
      if (data[i] == '\n' || data[i] == '\r') {
        segment(pending);
        pending.clear();
      }
    }
  }
  void finish() {
    if (!pending.empty())
      segment(pending);
    pending.clear();
    if (inBox)
      emit(box);
    inBox = false;
  }

private:
  static bool isRule(const std::string &s) {
    return s.size() > 20 && s.compare(0, 20, std::string(20, '-')) == 0;
  }
  void emit(const std::string &s) {
    sawError |= s.find("error:") != std::string::npos;
    std::fwrite(s.data(), 1, s.size(), stderr);
    std::fflush(stderr);
  }
  void segment(const std::string &s) {
    if (inBox) {
      if (isRule(s)) {
        inBox = false;
        summarize();
      } else {
        box += s;
      }
      return;
    }
    if (isRule(s)) {
      inBox = true;
      box = s;
      return;
    }
    if (s.find("ORTE_ERROR_LOG") != std::string::npos)
      return;
    // With several ranks failing, Open MPI counts the help texts it did not
    // repeat ("[host:123] 1 more process has sent help message
    // help-mpi-api.txt / mpi-abort", "Set MCA parameter ... to 0 to see all
    // help / error messages"): the ranks' own lines said it.
    if (s.find("sent help message") != std::string::npos ||
        s.find("orte_base_help_aggregate") != std::string::npos)
      return;
    emit(s);
  }
  void summarize() {
    // "mpirun noticed that process rank 3 with PID 123 on node n exited on
    // signal 9 (Killed)."
    size_t at = box.find("process rank ");
    size_t sig = box.find("exited on signal ");
    if (at != std::string::npos && sig != std::string::npos) {
      int rank = std::atoi(box.c_str() + at + 13);
      int signal = std::atoi(box.c_str() + sig + 17);
      std::string why;
      size_t open = box.find('(', sig), close = box.find(')', sig);
      if (open != std::string::npos && close != std::string::npos && close > open)
        why = " (" + box.substr(open + 1, close - open - 1) + ")";
      std::string exe = rank >= 0 && rank < int(devices.size())
                            ? " (" + devices[size_t(rank)] + ")"
                            : std::string();
      emit("pipe-run: error: rank " + std::to_string(rank) + exe +
           " was killed by signal " + std::to_string(signal) + why +
           "; the other ranks were stopped\n");
      return;
    }
    if (box.find("MPI_ABORT was invoked") != std::string::npos ||
        box.find("Primary job") != std::string::npos ||
        box.find("exited with status") != std::string::npos)
      return; // the rank's own error line said it
    // "mpirun detected that one or more processes exited with non-zero
    // status ... Process name: [[5,1],1] Exit code: 1": after a rank's own
    // error line, nothing to add; else one line naming the rank.
    if (box.find("exited with non-zero status") != std::string::npos) {
      if (sawError)
        return;
      size_t name = box.find("Process name: [[");
      size_t close = name == std::string::npos ? name : box.find("],", name);
      size_t code = box.find("Exit code:");
      if (close != std::string::npos && code != std::string::npos) {
        int rank = std::atoi(box.c_str() + close + 2);
        int status = std::atoi(box.c_str() + code + 10);
        emit("pipe-run: error: rank " + std::to_string(rank) + " exited with status " +
             std::to_string(status) + "; the other ranks were stopped\n");
        return;
      }
    }
    emit(box + std::string(60, '-') + "\n");
  }

  std::vector<std::string> devices;
  std::string pending, box;
  bool inBox = false;
  bool sawError = false; // a line with "error:" went out
};

/// The child a signal to pipe-run is passed on to (mpirun, which passes it
/// to the ranks): a `kill` of pipe-run alone (not its process group) would
/// else leave mpirun and the ranks training.
volatile sig_atomic_t signalledChild = 0, signalReceived = 0;

extern "C" void passSignalOn(int sig) {
  signalReceived = sig;
  if (signalledChild > 0)
    kill(pid_t(signalledChild), sig);
}

/// From now on SIGINT, SIGTERM and SIGHUP to pipe-run go to `child`.
void passSignalsTo(pid_t child) {
  signalledChild = child;
  struct sigaction action {};
  action.sa_handler = passSignalOn;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int sig : {SIGINT, SIGTERM, SIGHUP})
    sigaction(sig, &action, nullptr);
}

/// Runs mpirun with its stderr through StderrFilter; its exit status.
int runFiltered(std::vector<char *> &cargs, std::vector<std::string> devices) {
  int fds[2];
  if (pipe(fds) != 0)
    return -1;
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    execvp(cargs[0], cargs.data());
    std::fprintf(stderr, "pipe-run: error: cannot run %s: %s\n", cargs[0],
                 std::strerror(errno));
    _exit(127);
  }
  close(fds[1]);
  passSignalsTo(pid);
  StderrFilter filter(std::move(devices));
  char buffer[4096];
  for (;;) {
    ssize_t n = read(fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    filter.feed(buffer, size_t(n));
  }
  filter.finish();
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  // Stopped by a signal to pipe-run: exit as killed by it.
  if (signalReceived)
    return 128 + signalReceived;
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return 1;
}

/// A non-negative integer option value, or nullopt.
std::optional<long long> integerValue(const char *text) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(text, &end, 10);
  if (errno || !*text || *end)
    return std::nullopt;
  return v;
}

} // namespace

/// OpenBLAS picks its kernels by the CPU's model when a process loads it.
/// Debian's 0.3.21 does not know newer CPUs (the Xeon of family 6 model 207)
/// and falls back to its SSE3 Prescott kernels there: 3-6x slower on the
/// small products the runtime leaves to OpenBLAS (docs/design-notes.md,
/// "Runtime"). This process has loaded it (through the runtime library), so
/// it asks OpenBLAS which kernels it chose. Only where that is the fallback,
/// and OPENBLAS_CORETYPE is unset, the ranks get the kernels the CPU's flags
/// call for: SkylakeX with AVX-512, Haswell with AVX2 and FMA. A core type the
/// environment sets is kept, and so is any CPU OpenBLAS recognises
/// (DESIGN.md: never override a core type blindly). Returns the core type
/// set, or null.
static const char *blasCoreForRanks() {
  if (std::getenv("OPENBLAS_CORETYPE"))
    return nullptr;
  using CoreName = char *(*)();
  auto coreName = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const char *name = coreName ? coreName() : nullptr;
  if (!name || strcasecmp(name, "prescott") != 0)
    return nullptr;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  std::vector<std::string> flags;
  while (std::getline(cpuinfo, line))
    if (line.rfind("flags", 0) == 0) {
      std::istringstream words(line.substr(line.find(':') + 1));
      for (std::string w; words >> w;)
        flags.push_back(w);
      break;
    }
  auto has = [&](std::initializer_list<const char *> want) {
    for (const char *w : want)
      if (std::find(flags.begin(), flags.end(), w) == flags.end())
        return false;
    return true;
  };
  const char *core = has({"avx512f", "avx512bw", "avx512vl", "avx512dq"}) ? "SkylakeX"
                     : has({"avx2", "fma"})                               ? "Haswell"
                                                                          : nullptr;
  if (core)
    setenv("OPENBLAS_CORETYPE", core, 1);
  return core;
}

int main(int argc, char **argv) {
  if (argc == 2 && !std::strcmp(argv[1], "--version")) {
    std::printf("pipe-run: %s\n", mlir::pipec::versionString().c_str());
    return 0;
  }
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fprintf(argc < 2 ? stderr : stdout,
                 "usage: pipe-run OUT --data D.npz --steps K [options]\n"
                 "\n"
                 "Trains with the executables pipe-compile wrote to OUT (one MPI rank\n"
                 "per device under mpirun when plan.json lists several).\n"
                 "\n"
                 "  --data D.npz        training data: one array per graph input (required)\n"
                 "  --steps K           training steps, one mini-batch each (required)\n"
                 "  --no-shuffle        read the rows in order (default: shuffled per epoch)\n"
                 "  --seed S            shuffling and dropout seed (default: 0)\n"
                 "  --log F.jsonl       one JSON line per step: step, loss, seconds\n"
                 "  --save F.onnx       the trained model, as the input ONNX with new weights\n"
                 "  --trace F.json      a Chrome trace of every rank's kernels and transfers\n"
                 "  --plot F.png        the loss curve as a PNG, when training ends (with\n"
                 "                      --eval-data, the evaluations' loss and accuracy)\n"
                 "  --checkpoint DIR    write a checkpoint after the last step (atomically, per rank)\n"
                 "  --checkpoint-every K  also after every K-th step (DIR keeps the latest)\n"
                 "  --resume DIR        start from a checkpoint (same OUT and flags)\n"
                 "  --threads N         kernel threads per rank (default: $PIPERT_THREADS, else\n"
                 "                      the usable cores / ranks, at least 1)\n"
                 "  --on-nonfinite M    a NaN or infinite loss: stop (default: name the\n"
                 "                      step and the first parameter with one), skip\n"
                 "                      (undo that step's update, count it; synchronous\n"
                 "                      schedules) or warn (go on)\n"
                 "  --eval-data V.npz   an evaluation pass over V (arrays as --data): the\n"
                 "                      model in inference mode (Dropout off, BatchNorm\n"
                 "                      on its running statistics), no update; its mean\n"
                 "                      loss after the last step, on stderr and in --log\n"
                 "  --eval-every K      also after every K-th step\n"
                 "  --eval-batches N    at most N batches of V (default: all whole ones)\n"
                 "  --quiet             no per-step progress on stderr\n"
                 "  --version           the pipec version, git commit and LLVM version\n");
    return argc < 2 ? 2 : 0;
  }
  std::string out = argv[1];
  struct stat st;
  if (stat(out.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return fail("'" + out + "' is not a directory written by pipe-compile");

  // The runtime's environment variables, checked as the ranks read them
  // (under mpirun each rank would fail alike, and Open MPI add its texts).
  if (std::string bad = checkEnvironment(); !bad.empty())
    return fail(bad);

  // Check the command line here so that a typo fails before MPI starts.
  bool haveData = false, haveSteps = false;
  std::vector<std::pair<std::string, std::string>> outputs; // flag, file
  std::string dataPath, evalPath;
  bool evalOptions = false; // --eval-every or --eval-batches
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    bool known = false;
    for (const char *o : kFlagOptions)
      known |= a == o;
    for (const char *o : kValueOptions)
      if (a == o) {
        if (i + 1 >= argc)
          return fail("option " + a + " needs a value");
        // `--log --quiet` would write a log named --quiet and run loud.
        for (const char *known : kValueOptions)
          if (!std::strcmp(argv[i + 1], known))
            return fail("option " + a + " needs a value, not the option " + known);
        for (const char *known : kFlagOptions)
          if (!std::strcmp(argv[i + 1], known))
            return fail("option " + a + " needs a value, not the option " + known);
        if (a == "--data") {
          haveData = true;
          dataPath = argv[i + 1];
        }
        if (a == "--steps")
          haveSteps = true;
        if (a == "--eval-data")
          evalPath = argv[i + 1];
        if (a == "--eval-every" || a == "--eval-batches")
          evalOptions = true;
        if (a == "--steps" || a == "--seed" || a == "--threads" ||
            a == "--checkpoint-every" || a == "--eval-every" || a == "--eval-batches") {
          std::optional<long long> v = integerValue(argv[i + 1]);
          long long least = a == "--seed" ? 0 : 1;
          if (!v || *v < least)
            return fail(a + " must be an integer >= " + std::to_string(least) +
                        ", not '" + argv[i + 1] + "'");
        }
        if (a == "--on-nonfinite" && std::strcmp(argv[i + 1], "stop") &&
            std::strcmp(argv[i + 1], "skip") && std::strcmp(argv[i + 1], "warn"))
          return fail(std::string("--on-nonfinite must be stop, skip or warn, "
                                  "not '") + argv[i + 1] + "'");
        if (a == "--resume") {
          struct stat rs;
          if (stat(argv[i + 1], &rs) != 0 || !S_ISDIR(rs.st_mode))
            return fail(std::string("--resume ") + argv[i + 1] +
                        ": no such checkpoint directory");
          // A directory --checkpoint wrote has LATEST (or, a step's own,
          // the ranks' files): else each rank would say its file is missing.
          struct stat cs;
          const std::string dir = argv[i + 1];
          if (stat((dir + "/LATEST").c_str(), &cs) != 0 &&
              stat((dir + "/rank-0.ckpt").c_str(), &cs) != 0)
            return fail("--resume " + dir +
                        ": not a checkpoint directory (no LATEST and no rank-0.ckpt; "
                        "give the directory --checkpoint wrote)");
        }
        if (a == "--log" || a == "--save" || a == "--trace" ||
            a == "--checkpoint" || a == "--plot") {
          // The file (or directory) goes into an existing directory.
          std::string target = argv[i + 1];
          size_t slash = target.find_last_of('/');
          std::string parent =
              slash == std::string::npos ? "." : target.substr(0, slash);
          struct stat ps;
          if (a != "--checkpoint" && !parent.empty() &&
              (stat(parent.c_str(), &ps) != 0 || !S_ISDIR(ps.st_mode)))
            return fail(a + " " + target + ": no directory '" + parent + "'");
          if (!parent.empty() && access(parent.c_str(), W_OK) != 0 &&
              a != "--checkpoint")
            return fail(a + " " + target + ": cannot write into '" + parent +
                        "'");
          // A file's place must not be a directory (the run would end
          // there, after training); a checkpoint directory's must be one
          // (or nothing yet) that this user can write into.
          struct stat ts;
          const bool exists = stat(target.c_str(), &ts) == 0;
          if (a != "--checkpoint" && exists && S_ISDIR(ts.st_mode))
            return fail(a + " " + target + ": is a directory (name the file to write)");
          if (a == "--checkpoint" && exists &&
              (!S_ISDIR(ts.st_mode) || access(target.c_str(), W_OK) != 0))
            return fail(a + " " + target + ": " +
                        (S_ISDIR(ts.st_mode) ? "cannot write into it"
                                             : "is not a directory"));
          if (a == "--checkpoint" && !exists)
            if (std::error_code ec = llvm::sys::fs::create_directories(target))
              return fail(a + " " + target + ": cannot create it (" + ec.message() + ")");
          if (a != "--checkpoint") {
            // Two outputs into one file: the later would overwrite the first.
            for (const auto &[flag, path] : outputs)
              if (path == target)
                return fail(a + " " + target + ": the same file as " + flag);
            outputs.push_back({a, target});
          }
        }
        ++i;
        known = true;
      }
    if (!known)
      return fail("unknown option '" + a + "'");
  }
  if (!haveData)
    return fail("--data D.npz is required");
  if (!haveSteps)
    return fail("--steps K is required");
  if (evalOptions && evalPath.empty())
    return fail("--eval-every and --eval-batches need --eval-data V.npz (the data to "
                "evaluate on)");
  // An output must not overwrite the data or what pipe-compile wrote.
  {
    auto sameFile = [](const std::string &a, const std::string &b) {
      struct stat sa, sb;
      return stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 &&
             sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    };
    std::vector<std::string> compiled = {out + "/plan.json", out + "/model.onnx"};
    for (int d = 0; d < 4096; ++d) {
      std::string exe = out + "/device" + std::to_string(d);
      if (!isExecutable(exe))
        break;
      compiled.push_back(exe);
    }
    for (const auto &[flag, path] : outputs) {
      if (sameFile(path, dataPath))
        return fail(flag + " " + path + ": is the --data file (it would be overwritten); "
                                        "name another file");
      if (!evalPath.empty() && sameFile(path, evalPath))
        return fail(flag + " " + path + ": is the --eval-data file (it would be "
                                        "overwritten); name another file");
      for (const std::string &c : compiled)
        if (sameFile(path, c))
          return fail(flag + " " + path + ": is " + c +
                      ", which pipe-compile wrote (it would be overwritten); name another "
                      "file");
    }
  }
  for (int i = 2; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], "--checkpoint-every")) {
      bool haveCheckpoint = false;
      for (int j = 2; j + 1 < argc; ++j)
        haveCheckpoint |= !std::strcmp(argv[j], "--checkpoint");
      if (!haveCheckpoint)
        return fail("--checkpoint-every " + std::string(argv[i + 1]) +
                    " needs --checkpoint DIR (the directory to write them to)");
    }

  // How many devices the plan has (docs/plan-json.md).
  int planned = 1;
  std::vector<std::string> executableHashes; // plan.json's, one a device
  std::string runIdentity;
  {
    std::string path = out + "/plan.json";
    std::ifstream plan(path);
    if (!plan)
      return fail("'" + out + "' has no plan.json (run pipe-compile -o " + out +
                  " first)");
    std::stringstream text;
    text << plan.rdbuf();
    llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(text.str());
    if (!parsed)
      return fail(path + ": not valid JSON (" +
                  llvm::toString(parsed.takeError()) +
                  "); compile again with pipe-compile");
    const llvm::json::Object *root = parsed->getAsObject();
    if (!root)
      return fail(path + ": not a JSON object; compile again with pipe-compile");
    std::optional<int64_t> version = root->getInteger("version");
    if (!version || *version != mlir::pipec::kPlanVersion)
      return fail(path + ": plan version " +
                  (version ? std::to_string(*version) : std::string("none")) +
                  ", this pipe-run reads version " +
                  std::to_string(mlir::pipec::kPlanVersion) +
                  "; compile again with this pipe-compile");
    std::optional<int64_t> devices = root->getInteger("devices");
    if (!devices || *devices < 1)
      return fail(path + ": \"devices\" must be a positive integer");
    planned = static_cast<int>(*devices);
    if (const llvm::json::Array *hashes = root->getArray("executable_hashes"))
      for (const llvm::json::Value &h : *hashes)
        executableHashes.push_back(h.getAsString().value_or("").str());
    // An edited plan.json whose device count disagrees with its own device
    // plans would start the wrong number of ranks (each then aborts in MPI).
    if (const llvm::json::Array *plans = root->getArray("device_plans");
        plans && static_cast<int64_t>(plans->size()) != *devices)
      return fail(path + ": \"devices\" is " + std::to_string(*devices) + " but \"device_plans\" lists " +
                  std::to_string(plans->size()) + "; compile again with pipe-compile");
    // The fields the checks below read, as pipe-compile writes them (an
    // edited plan.json is refused here, not met with a crash or unchecked
    // data).
    for (const char *key : {"batch", "pipelines", "microbatches"})
      if (const llvm::json::Value *v = root->get(key))
        if (std::optional<int64_t> n = v->getAsInteger(); !n || *n < 1)
          return fail(path + ": \"" + key +
                      "\" is not a positive integer; compile again with pipe-compile");
    if (const llvm::json::Value *d = root->get("data")) {
      const llvm::json::Array *spec = d->getAsArray();
      if (!spec)
        return fail(path + ": \"data\" is not an array; compile again with pipe-compile");
      for (size_t i = 0; i < spec->size(); ++i) {
        const llvm::json::Object *e = (*spec)[i].getAsObject();
        if (!e || !e->getString("name"))
          return fail(path + ": data[" + std::to_string(i) +
                      "] is not an object with a \"name\"; compile again with pipe-compile");
      }
    }
    // --on-nonfinite skip undoes a step; a no-flush method's micro-batches
    // span steps (the ranks would refuse it, each in a line).
    for (int i = 2; i + 1 < argc; ++i)
      if (!std::strcmp(argv[i], "--on-nonfinite") && !std::strcmp(argv[i + 1], "skip"))
        if (const llvm::json::Array *plans = root->getArray("device_plans"))
          for (const llvm::json::Value &p : *plans)
            if (const llvm::json::Object *dp = p.getAsObject())
              if (const llvm::json::Object *m = dp->getObject("method");
                  m && m->getBoolean("no_flush").value_or(false))
                return fail("--on-nonfinite skip undoes a step, which " + out + "'s " +
                            m->getString("name").value_or("no-flush").str() +
                            " (its micro-batches span steps) does not have: use stop or warn");
    // What a checkpoint of this plan holds (its state and data position).
    {
      const llvm::json::Object *opt = root->getObject("optimizer");
      std::string optimizerName =
          opt && opt->getString("name") ? opt->getString("name")->str() : "?";
      std::string schedule =
          root->getString("schedule") ? root->getString("schedule")->str() : "one device";
      std::vector<std::pair<std::string, int64_t>> stages;
      if (const llvm::json::Object *nodes = root->getObject("node_stages"))
        for (const auto &[node, stage] : *nodes)
          stages.push_back({node.str(), stage.getAsInteger().value_or(-1)});
      std::sort(stages.begin(), stages.end());
      uint64_t digest = 1469598103934665603ull; // FNV-1a of the partition
      for (const auto &[node, stage] : stages)
        for (char c : node + "=" + std::to_string(stage) + ";")
          digest = (digest ^ uint8_t(c)) * 1099511628211ull;
      char hex[17];
      std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)digest);
      // What each device keeps (trained parameters: --frozen; weight
      // versions; optimizer state) and the method variants that keep other
      // state or read other versions (vertical sync, PipeMare's δ).
      std::string variants;
      uint64_t state = 1469598103934665603ull;
      auto mix = [&](const std::string &text) {
        for (char c : text + ";")
          state = (state ^ uint8_t(c)) * 1099511628211ull;
      };
      if (const llvm::json::Array *plans = root->getArray("device_plans"))
        for (const llvm::json::Value &p : *plans) {
          const llvm::json::Object *dp = p.getAsObject();
          if (!dp)
            continue;
          if (const llvm::json::Array *params = dp->getArray("parameters"))
            for (const llvm::json::Value &name : *params)
              mix(name.getAsString().value_or("").str());
          if (const llvm::json::Object *m = dp->getObject("method")) {
            mix("versions " + std::to_string(m->getInteger("weight_versions").value_or(0)));
            if (m->getBoolean("vertical_sync").value_or(false) &&
                variants.find("vertical sync") == std::string::npos)
              variants += " (vertical sync)";
            if (const llvm::json::Value *d = m->get("discrepancy_correction");
                d && d->kind() != llvm::json::Value::Null &&
                variants.find("discrepancy") == std::string::npos)
              variants += " (discrepancy correction)";
          }
          if (const llvm::json::Object *mem = dp->getObject("memory"))
            mix("state " + std::to_string(mem->getInteger("optimizer_state_bytes").value_or(0)));
        }
      else if (const llvm::json::Array *params = root->getArray("parameters"))
        for (const llvm::json::Value &p : *params)
          if (const llvm::json::Object *b = p.getAsObject())
            mix(b->getString("name").value_or("").str());
      char stateHex[17];
      std::snprintf(stateHex, sizeof stateHex, "%016llx", (unsigned long long)state);
      runIdentity = schedule + variants + " on " + std::to_string(*devices) + " device(s), " +
                    std::to_string(root->getInteger("pipelines").value_or(1)) +
                    " pipeline(s), M=" +
                    std::to_string(root->getInteger("microbatches").value_or(1)) +
                    ", batch " + std::to_string(root->getInteger("batch").value_or(0)) +
                    ", " + optimizerName + ", partition " + hex + ", state " + stateHex;
    }
    // The data, before anything starts (plans without "data" are checked
    // by the ranks as they load it).
    if (const llvm::json::Array *spec = root->getArray("data")) {
      int64_t rowsPerStep = root->getInteger("batch").value_or(0) *
                            root->getInteger("pipelines").value_or(1);
      std::string problem =
          checkData(dataPath, *spec, rowsPerStep, root->getInteger("microbatches").value_or(1),
                    root->getInteger("pipelines").value_or(1));
      if (!problem.empty())
        return fail(problem);
      if (!evalPath.empty()) {
        problem = checkData(evalPath, *spec, rowsPerStep,
                            root->getInteger("microbatches").value_or(1),
                            root->getInteger("pipelines").value_or(1), "--eval-data");
        if (!problem.empty())
          return fail(problem);
      }
    }
    // A plan without an evaluation pass says why (no "eval": an older
    // compile; the ranks refuse it).
    if (const llvm::json::Object *evalPlan = root->getObject("eval");
        evalPlan && !evalPath.empty() && !evalPlan->getBoolean("available").value_or(true))
      return fail("--eval-data: this plan has no evaluation pass: " +
                  evalPlan->getString("unavailable").value_or("").str() +
                  "; drop --eval-data");
  }
  // A checkpoint belongs to its run: the order the data is read in
  // (--seed, --no-shuffle), the data file (its size and content hash) and
  // the plan it trained (method, devices, stages, micro-batches, batch,
  // optimizer, what each device keeps). The ranks write the record into
  // each checkpoint they commit (DIR/step-N/run-info, from
  // $PIPERT_CHECKPOINT_RECORD), so that it is the record of the run that
  // wrote the step (a run that starts into DIR and fails leaves it), and a
  // resume must give the same: else it would go on on other rows, or load
  // state into a program that keeps other state (a synchronous plan drops
  // PipeDream's stashed versions) or reads the data otherwise.
  {
    std::string seed = "0", checkpointDir, resumeDir;
    bool shuffle = true;
    for (int i = 2; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--no-shuffle")
        shuffle = false;
      else if (i + 1 < argc && a == "--seed")
        seed = std::to_string(integerValue(argv[i + 1]).value_or(0));
      else if (i + 1 < argc && a == "--checkpoint")
        checkpointDir = argv[i + 1];
      else if (i + 1 < argc && a == "--resume")
        resumeDir = argv[i + 1];
      // A value option's value is not an option of its own.
      bool takesValue = false;
      for (const char *o : kValueOptions)
        takesValue |= a == o;
      i += takesValue;
    }
    const std::string order =
        "--seed " + seed + (shuffle ? " (shuffled)" : " --no-shuffle");
    struct stat dataStat {};
    std::string data =
        "a data file of " +
        std::to_string(stat(dataPath.c_str(), &dataStat) == 0 ? (long long)dataStat.st_size
                                                               : -1LL) +
        " bytes";
    if (!checkpointDir.empty() || !resumeDir.empty()) {
      auto buffer = llvm::MemoryBuffer::getFile(dataPath, /*IsText=*/false,
                                                /*RequiresNullTerminator=*/false);
      if (buffer) {
        char hex[17];
        std::snprintf(hex, sizeof hex, "%016llx",
                      (unsigned long long)llvm::xxh3_64bits(llvm::ArrayRef<uint8_t>(
                          reinterpret_cast<const uint8_t *>((*buffer)->getBufferStart()),
                          (*buffer)->getBufferSize())));
        data += " (xxh3 " + std::string(hex) + ")";
      }
    }
    const std::string run = runIdentity;
    if (!resumeDir.empty()) {
      // The record of the step LATEST names; a step directory's own; or
      // an older pipe-run's, beside the steps (DIR/data-order, DIR/run).
      std::string was, wasData, wasRun;
      bool found = false;
      std::vector<std::string> places;
      if (std::ifstream latest(resumeDir + "/LATEST"); latest) {
        std::string step;
        if (std::getline(latest, step) && step.rfind("step-", 0) == 0 &&
            step.find('/') == std::string::npos)
          places.push_back(resumeDir + "/" + step + "/run-info");
      }
      places.push_back(resumeDir + "/run-info");
      for (const std::string &place : places) {
        std::ifstream record(place);
        if (record && std::getline(record, was)) {
          std::getline(record, wasData);
          std::getline(record, wasRun);
          found = true;
          break;
        }
      }
      for (const std::string &dir : {resumeDir, resumeDir + "/.."}) {
        if (found)
          break;
        std::ifstream recorded(dir + "/data-order");
        if (!recorded || !std::getline(recorded, was))
          continue;
        std::getline(recorded, wasData);
        std::ifstream recordedRun(dir + "/run");
        if (recordedRun)
          std::getline(recordedRun, wasRun);
        found = true;
      }
      // Records of older runs have no content hash: compare the size.
      auto sameData = [&](const std::string &recorded) {
        if (recorded == data)
          return true;
        return recorded.find(" (xxh3 ") == std::string::npos &&
               data.rfind(recorded, 0) == 0;
      };
      if (found && was != order)
        return fail("--resume " + resumeDir + ": the checkpointed run read the data with " +
                    was + ", this one with " + order +
                    ": give the same to go on where it left off");
      if (found && !wasData.empty() && !sameData(wasData))
        return fail("--resume " + resumeDir + ": the checkpointed run read " + wasData +
                    ", --data " + dataPath + " is " + data +
                    ": give the same data to go on where it left off");
      if (found && !wasRun.empty() && wasRun != run)
        return fail("--resume " + resumeDir + ": the checkpointed run trained " + wasRun +
                    ", " + out + " is " + run +
                    ": resume with the plan it was compiled to (pipe-compile with the "
                    "same flags; --lr and the schedule may differ)");
    }
    if (!checkpointDir.empty()) {
      setenv("PIPERT_CHECKPOINT_RECORD", (order + "\n" + data + "\n" + run + "\n").c_str(), 1);
      // One run writes into a checkpoint directory at a time: two would mix
      // their ranks' files in one step's directory. The lock is held until
      // this process ends (and across the exec of a one-device run: the
      // descriptor is inherited, not closed on exec).
      int lock = ::open((checkpointDir + "/.lock").c_str(), O_RDWR | O_CREAT, 0644);
      if (lock < 0)
        return fail("--checkpoint " + checkpointDir + ": cannot write into it (" +
                    std::strerror(errno) + ")");
      if (flock(lock, LOCK_EX | LOCK_NB) != 0)
        return fail("--checkpoint " + checkpointDir +
                    ": another pipe-run is writing checkpoints into it (it holds " +
                    checkpointDir + "/.lock); wait for it to end or give another directory");
    }
  }
  std::vector<std::string> devices;
  for (int d = 0; d < planned; ++d) {
    std::string exe = out + "/device" + std::to_string(d);
    if (!isExecutable(exe))
      break;
    devices.push_back(exe);
  }
  if (devices.empty())
    return fail("'" + out + "' has no device0 executable (run pipe-compile -o " +
                out + " first)");
  if (static_cast<int>(devices.size()) != planned)
    return fail("plan.json says " + std::to_string(planned) +
                " devices, but " + out + "/device" +
                std::to_string(devices.size()) + " is missing");
  // Executables of another compile beside this plan.json (a device<k>
  // copied in): their ranks would wait on each other for ever, or train
  // with another compile's settings.
  if (!executableHashes.empty()) {
    if (static_cast<int>(executableHashes.size()) != planned)
      return fail(out + "/plan.json: " + std::to_string(executableHashes.size()) +
                  " executable hashes for " + std::to_string(planned) +
                  " devices; compile again with pipe-compile");
    for (int d = 0; d < planned; ++d)
      if (mlir::pipec::executableHash(devices[d]) != executableHashes[d])
        return fail(devices[d] + " is not the executable " + out +
                    "/plan.json was compiled with (another pipe-compile wrote it): "
                    "compile again into " + out +
                    " (a wrapper put there on purpose: delete plan.json's "
                    "\"executable_hashes\")");
  }

  // --plot is pipe-run's: the ranks write the log it draws from (a
  // temporary one unless --log names one).
  std::string plotPath, logPath, tempLog;
  std::vector<std::string> rankArgs;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--plot") {
      plotPath = argv[++i];
      continue;
    }
    if (a == "--log")
      logPath = argv[i + 1];
    rankArgs.push_back(a);
  }
  // Kernel threads per rank: --threads or $PIPERT_THREADS, else the cores
  // this process may run on shared among the ranks (at least 1), so that
  // ranks x threads <= cores.
  const char *envThreads = std::getenv("PIPERT_THREADS");
  bool threadsGiven = envThreads != nullptr;
  std::string rankThreads = envThreads ? envThreads : "";
  bool quiet = false;
  for (size_t k = 0; k < rankArgs.size(); ++k) {
    if (rankArgs[k] == "--threads") {
      threadsGiven = true;
      if (k + 1 < rankArgs.size())
        rankThreads = rankArgs[k + 1];
    }
    quiet |= rankArgs[k] == "--quiet";
  }
  if (!threadsGiven) {
    cpu_set_t set;
    int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    int threads = std::max<int>(1, cores / int(devices.size()));
    rankThreads = std::to_string(threads);
    rankArgs.push_back("--threads");
    rankArgs.push_back(rankThreads);
    if (!quiet)
      std::fprintf(stderr, "pipe-run: %zu rank%s x %d kernel thread%s (%d core%s; "
                   "--threads N to choose)\n", devices.size(),
                   devices.size() == 1 ? "" : "s", threads, threads == 1 ? "" : "s",
                   cores, cores == 1 ? "" : "s");
    // Other processes on these cores: the GEMM library's threads wait by
    // spinning (OpenMP), and a spinning thread whose partner lost its core
    // burns the time slice. Measured on 2 cores with one busy loop beside
    // the transformer example at 2 threads: 0.63-0.77 s for 400 steps,
    // against 0.29-0.38 with OMP_WAIT_POLICY=passive and 0.25 at 1 thread.
    // What the others use now: the machine's busy time over 0.1 s, before
    // any rank starts (the load average would count the compile just run).
    if (!quiet && threads > 1 && !std::getenv("OMP_WAIT_POLICY") &&
        !std::getenv("GOMP_SPINCOUNT")) {
      auto sample = [](double &busy, double &total) {
        busy = total = 0;
        FILE *f = std::fopen("/proc/stat", "r");
        if (!f)
          return false;
        double v[8] = {};
        int n = std::fscanf(f, "cpu %lf %lf %lf %lf %lf %lf %lf %lf", &v[0], &v[1], &v[2],
                            &v[3], &v[4], &v[5], &v[6], &v[7]);
        std::fclose(f);
        if (n < 5)
          return false;
        for (double x : v)
          total += x;
        busy = total - v[3] - v[4]; // idle, iowait
        // Less this process's own time (the same clock ticks): the
        // OpenBLAS this process loads starts its worker threads, which poll
        // for work for a while, and counted them as another process's load
        // on an idle machine.
        std::ifstream self("/proc/self/stat");
        std::string stat((std::istreambuf_iterator<char>(self)), {});
        size_t paren = stat.rfind(')');
        if (paren != std::string::npos) {
          std::istringstream fields(stat.substr(paren + 2));
          std::string field;
          double utime = 0, stime = 0;
          for (int k = 3; k <= 15 && fields >> field; ++k)
            if (k == 14)
              utime = std::atof(field.c_str());
            else if (k == 15)
              stime = std::atof(field.c_str());
          busy -= utime + stime;
        }
        return true;
      };
      double b0, t0, b1, t1;
      if (sample(b0, t0)) {
        usleep(100000);
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        if (sample(b1, t1) && t1 > t0 && online > 0) {
          double others = (b1 - b0) / (t1 - t0) * double(online);
          if (others >= 0.5)
            std::fprintf(stderr, "pipe-run: note: other processes keep %.1f of the %ld cores "
                         "busy; kernel threads that wait spinning lose their time there: "
                         "--threads 1 or OMP_WAIT_POLICY=passive can be faster\n",
                         others, online);
        }
      }
    }
  }
  // OpenBLAS starts its worker threads (one per core) when the rank loads
  // it; the rank's openblas_set_num_threads later only stops handing them
  // work, and an idle worker spins on sched_yield for a while after every
  // call (perf: 9% of a CNN rank's samples at --threads 1, cycles another
  // rank on the same core could use). So the ranks' OpenBLAS gets the
  // kernel thread count up front (unless the caller set it): at 1, no
  // worker thread at all.
  if (!rankThreads.empty() && std::atoi(rankThreads.c_str()) > 0)
    setenv("OPENBLAS_NUM_THREADS", rankThreads.c_str(), 0);
  if (const char *core = blasCoreForRanks(); core && !quiet)
    std::fprintf(stderr, "pipe-run: OpenBLAS does not know this CPU and would run its SSE3 "
                 "(Prescott) kernels; the ranks run its %s kernels (set OPENBLAS_CORETYPE "
                 "to choose)\n", core);
  if (!plotPath.empty() && logPath.empty()) {
    const char *tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/pipe-run-log.XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    int fd = mkstemp(buf.data());
    if (fd < 0)
      return fail("--plot: cannot create a temporary log: " +
                  std::string(std::strerror(errno)));
    close(fd);
    logPath = tempLog = buf.data();
    rankArgs.push_back("--log");
    rankArgs.push_back(logPath);
  }
  // One run writes a step log at a time: two would interleave their steps
  // in one file. An advisory lock on the log itself, held until this
  // process ends (and across the exec of a one-device run).
  if (!logPath.empty() && tempLog.empty()) {
    int lock = ::open(logPath.c_str(), O_WRONLY | O_CREAT, 0644);
    if (lock < 0)
      return fail("--log " + logPath + ": cannot write it (" + std::strerror(errno) + ")");
    if (flock(lock, LOCK_EX | LOCK_NB) != 0)
      return fail("--log " + logPath +
                  ": another pipe-run is writing its steps there; wait for it to end or give "
                  "another file");
  }
  auto drawPlot = [&](int rc) {
    if (plotPath.empty())
      return rc;
    std::vector<pipec::LossPoint> points;
    std::string problem = pipec::readLossLog(logPath, points);
    if (problem.empty())
      problem = pipec::writeLossPlot(plotPath, points, "training loss");
    if (!tempLog.empty())
      std::remove(tempLog.c_str());
    if (!problem.empty()) {
      std::fprintf(stderr, "pipe-run: %s: --plot %s: %s\n",
                   rc ? "warning" : "error", plotPath.c_str(), problem.c_str());
      return rc ? rc : 1;
    }
    return rc;
  };

  std::vector<std::string> args;
  if (devices.size() == 1) {
    args.push_back(devices[0]);
  } else {
    const char *mpirun = std::getenv("PIPEC_MPIRUN");
    args.push_back(mpirun ? mpirun : "mpirun");
    if (const char *flags = std::getenv("PIPEC_MPIRUN_FLAGS")) {
      std::istringstream words(flags);
      for (std::string w; words >> w;)
        args.push_back(w);
    } else {
      // Shared memory between the ranks of one machine, single-copy where
      // allowed (tools/common/MpiFlags.h).
      for (std::string &flag : pipectools::sharedMemoryMpiFlags())
        args.push_back(flag);
    }
    // Ranks that wait yield the core (more ranks than cores is the rule on
    // small machines); unless the caller says otherwise.
    setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
    setenv("OMPI_MCA_hwloc_base_binding_policy", "none", 0);
    for (size_t d = 0; d < devices.size(); ++d) {
      if (d)
        args.push_back(":");
      args.push_back("-np");
      args.push_back("1");
      args.push_back(devices[d]);
      args.insert(args.end(), rankArgs.begin(), rankArgs.end());
    }
  }
  if (devices.size() == 1)
    args.insert(args.end(), rankArgs.begin(), rankArgs.end());
  std::vector<char *> cargs;
  for (std::string &a : args)
    cargs.push_back(a.data());
  cargs.push_back(nullptr);
  // One device: run it as a child (not exec'd in place), so that a program
  // killed by a signal is reported in a line as a rank of several is.
  if (devices.size() == 1) {
    pid_t pid = fork();
    if (pid < 0)
      return fail("cannot run " + args[0] + ": " + std::strerror(errno));
    if (pid == 0) {
      execv(cargs[0], cargs.data());
      std::fprintf(stderr, "pipe-run: error: cannot run %s: %s\n", cargs[0],
                   std::strerror(errno));
      _exit(127);
    }
    passSignalsTo(pid);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    // A signal pipe-run forwarded (SIGINT, SIGTERM, SIGHUP) is the caller's
    // doing; any other ended the program.
    if (WIFSIGNALED(status) && WTERMSIG(status) != SIGINT && WTERMSIG(status) != SIGTERM &&
        WTERMSIG(status) != SIGHUP)
      std::fprintf(stderr, "pipe-run: error: %s was killed by signal %d (%s)\n",
                   devices[0].c_str(), WTERMSIG(status), strsignal(WTERMSIG(status)));
    return drawPlot(rc);
  }
  // A session directory of its own: Open MPI derives its default from the
  // launching process, and two jobs started at once on one machine (tests
  // in parallel) can collide there ("orte_session_dir failed: File exists").
  std::string session;
  if (!std::getenv("OMPI_MCA_orte_tmpdir_base")) {
    const char *tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/pipe-run.XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data())) {
      session = buf.data();
      setenv("OMPI_MCA_orte_tmpdir_base", session.c_str(), 1);
    }
  }
  int rc = runFiltered(cargs, devices);
  if (!session.empty()) {
    std::string cleanup = "rm -rf '" + session + "'";
    if (std::system(cleanup.c_str()) != 0)
      std::fprintf(stderr, "pipe-run: warning: could not remove %s\n", session.c_str());
  }
  if (rc < 0)
    return fail("cannot run " + args[0] + ": " + std::strerror(errno));
  return drawPlot(rc);
}
