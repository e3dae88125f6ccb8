//===- PackTransfers.cpp - pipe-pack-transfers ----------------------------===//
//
// Adjacent transfers between the same two devices for the same micro-batch
// travel as one message where both programs agree on it (Passes.td). Both
// sides of a link are decided here, on the module that holds every device's
// program, and recorded on the ops (pipe.pack_next): pipe-lower-programs
// lowers one device at a time and follows the marks.
//
//===----------------------------------------------------------------------===//
#include "dialects/pipe/PipeAttrNames.h"
#include "dialects/pipe/PipeDialect.h"
#include "pipec/Transforms/SchedulePasses.h"

#include <map>
#include <set>
#include <string>
#include <tuple>

namespace mlir::pipec {
#define GEN_PASS_DEF_PIPEPACKTRANSFERS
#include "pipec/Transforms/Passes.h.inc"
} // namespace mlir::pipec

using namespace mlir;
using namespace mlir::pipec;

namespace {

std::string tagOf(Operation *op) {
  if (!op)
    return "";
  if (auto s = dyn_cast<pipe::SendOp>(op))
    return s.getTag().str();
  return cast<pipe::RecvOp>(op).getTag().str();
}

struct PipePackTransfersPass
    : public pipec::impl::PipePackTransfersBase<PipePackTransfersPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // (from device, to device, tag) → the tags beside its transfers, "" for
    // none, on the sending and on the receiving side.
    using Key = std::tuple<int64_t, int64_t, std::string>;
    std::map<Key, std::set<std::string>> sendNext, sendPrev, recvNext, recvPrev;
    std::set<int64_t> devices;
    bool shared = false;
    module.walk([&](pipe::ProgramOp program) {
      int64_t dev = program.getDevice();
      shared |= !devices.insert(dev).second;
      program.walk([&](Operation *op) {
        if (auto s = dyn_cast<pipe::SendOp>(op)) {
          Key k{dev, s.getPeer(), s.getTag().str()};
          sendNext[k].insert(tagOf(pipe::adjacentTransfer(op, true)));
          sendPrev[k].insert(tagOf(pipe::adjacentTransfer(op, false)));
        } else if (auto r = dyn_cast<pipe::RecvOp>(op)) {
          Key k{r.getPeer(), dev, r.getTag().str()};
          recvNext[k].insert(tagOf(pipe::adjacentTransfer(op, true)));
          recvPrev[k].insert(tagOf(pipe::adjacentTransfer(op, false)));
        }
      });
    });
    // Replicated programs that share a device number address peers another
    // way: left as they are.
    if (shared)
      return;
    auto only = [](const std::map<Key, std::set<std::string>> &m, const Key &k,
                   const std::string &want) {
      auto it = m.find(k);
      return it != m.end() && it->second.size() == 1 && *it->second.begin() == want;
    };
    auto packs = [&](int64_t from, int64_t to, const std::string &t, const std::string &u) {
      if (t.empty() || u.empty() || t == u)
        return false;
      Key kt{from, to, t}, ku{from, to, u};
      return only(sendNext, kt, u) && only(sendPrev, ku, t) && only(recvNext, kt, u) &&
             only(recvPrev, ku, t);
    };
    module.walk([&](pipe::ProgramOp program) {
      int64_t self = program.getDevice();
      program.walk([&](Operation *op) {
        int64_t from, to;
        if (auto s = dyn_cast<pipe::SendOp>(op)) {
          from = self;
          to = s.getPeer();
        } else if (auto r = dyn_cast<pipe::RecvOp>(op)) {
          from = r.getPeer();
          to = self;
        } else {
          return;
        }
        Operation *next = pipe::adjacentTransfer(op, true);
        if (next && packs(from, to, tagOf(op), tagOf(next)))
          op->setAttr(pipe::attrs::kPackNext, UnitAttr::get(op->getContext()));
        else
          op->removeAttr(pipe::attrs::kPackNext);
      });
    });
  }
};

} // namespace
