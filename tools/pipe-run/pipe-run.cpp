//===- pipe-run.cpp - runs the executables pipe-compile wrote -------------===//
//
//   pipe-run OUT --data D.npz --steps K [--no-shuffle] [--seed S]
//            [--log steps.jsonl] [--save trained.onnx] [--trace t.json]
//            [--checkpoint DIR] [--resume DIR] [--threads N]
//
// One device: runs OUT/device0 in place of this process. Several devices
// (OUT/plan.json says "devices": N > 1): one MPI rank per executable, MPMD
// under mpirun (rank k runs OUT/device<k>), every rank with the same flags:
//   mpirun --oversubscribe [--allow-run-as-root] --mca btl self,vader
//          --mca btl_vader_single_copy_mechanism none
//          -np 1 OUT/device0 FLAGS : -np 1 OUT/device1 FLAGS ...
// PIPEC_MPIRUN names another mpirun; PIPEC_MPIRUN_FLAGS (split at spaces)
// replaces the options before the first -np.
//
//===----------------------------------------------------------------------===//
#include "pipec/Support/Version.h"
#include "pipec/Target/PlanVersion.h"

#include "llvm/Support/JSON.h"

#include <cerrno>
#include <fstream>
#include <sstream>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace {

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
                                     "--resume", "--threads"};
const char *const kFlagOptions[] = {"--no-shuffle", "--quiet"};

} // namespace

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
                 "  --checkpoint DIR    write a checkpoint after the last step (atomically, per rank)\n"
                 "  --resume DIR        start from a checkpoint (same OUT and flags)\n"
                 "  --threads N         kernel threads per rank (default: 1, or $PIPERT_THREADS)\n"
                 "  --quiet             no per-step progress on stderr\n"
                 "  --version           the pipec version, git commit and LLVM version\n");
    return argc < 2 ? 2 : 0;
  }
  std::string out = argv[1];
  struct stat st;
  if (stat(out.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return fail("'" + out + "' is not a directory written by pipe-compile");

  // Check the command line here so that a typo fails before MPI starts.
  bool haveData = false, haveSteps = false;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    bool known = false;
    for (const char *o : kFlagOptions)
      known |= a == o;
    for (const char *o : kValueOptions)
      if (a == o) {
        if (i + 1 >= argc)
          return fail("option " + a + " needs a value");
        if (a == "--data")
          haveData = true;
        if (a == "--steps")
          haveSteps = true;
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

  // How many devices the plan has (docs/plan-json.md).
  int planned = 1;
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
      // Shared memory between the ranks of one machine; oversubscribed
      // (fewer cores than ranks is fine); as root in containers.
      args.insert(args.end(), {"--oversubscribe", "--mca", "btl", "self,vader",
                               "--mca", "btl_vader_single_copy_mechanism",
                               "none"});
      if (geteuid() == 0)
        args.push_back("--allow-run-as-root");
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
      for (int i = 2; i < argc; ++i)
        args.push_back(argv[i]);
    }
  }
  if (devices.size() == 1)
    for (int i = 2; i < argc; ++i)
      args.push_back(argv[i]);
  std::vector<char *> cargs;
  for (std::string &a : args)
    cargs.push_back(a.data());
  cargs.push_back(nullptr);
  if (devices.size() == 1)
    execv(cargs[0], cargs.data());
  else
    execvp(cargs[0], cargs.data());
  return fail("cannot run " + args[0] + ": " + std::strerror(errno));
}
