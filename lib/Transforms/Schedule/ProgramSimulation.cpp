//===- ProgramSimulation.cpp - pipe.program ops as schedules --------------===//
#include "ProgramSimulation.h"
#include "pipec/Transforms/WholeBatch.h"

#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::pipec;

/// The devices of a collective instruction (pipe.allreduce, pipe.average,
/// pipe.clip_grad_norm).
static ArrayRef<int64_t> collectiveGroup(Operation *op) {
  return TypeSwitch<Operation *, ArrayRef<int64_t>>(op)
      .Case([](pipe::AllReduceOp r) { return r.getGroup(); })
      .Case([](pipe::AverageOp a) { return a.getGroup(); })
      .Case([](pipe::ClipGradNormOp c) { return c.getGroup(); });
}

namespace sched = mlir::pipec::schedule;

Operation *ProgramSet::opAt(sched::InstrRef ref) const {
  const auto &list = ops[ref.device];
  if (ref.index >= 0 && ref.index < int64_t(list.size()))
    return list[ref.index];
  return programs[ref.device];
}

int64_t ProgramSet::mbAt(sched::InstrRef ref) const {
  const auto &list = mbs[ref.device];
  if (ref.index >= 0 && ref.index < int64_t(list.size()))
    return list[ref.index];
  return -1;
}

std::string ProgramSet::describe(sched::InstrRef ref) const {
  return describeInstruction(opAt(ref), mbAt(ref));
}

static std::string typeString(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << type;
  return s;
}

/// The stage a forward or backward computes, from its callee (-1 when the
/// callee is not a stage; the op verifiers report that).
static int64_t calleeStage(Operation *op, FlatSymbolRefAttr callee) {
  auto stage = SymbolTable::lookupNearestSymbolFrom<pipe::StageOp>(op, callee);
  return stage ? stage.getStage() : -1;
}

int64_t mlir::pipec::runSteps(ArrayRef<pipe::ProgramOp> programs) {
  int64_t drain = -1;
  for (pipe::ProgramOp program : programs)
    if (program.isNoFlush())
      drain = std::max(drain, pipe::drainSteps(program));
  return drain < 0 ? 1 : 2 * drain + 3;
}

FailureOr<ProgramSet> mlir::pipec::collectPrograms(ModuleOp module) {
  ProgramSet set;
  for (auto program : module.getOps<pipe::ProgramOp>())
    set.programs.push_back(program);
  llvm::stable_sort(set.programs, [](pipe::ProgramOp a, pipe::ProgramOp b) {
    return a.getDevice() < b.getDevice();
  });
  llvm::DenseMap<int64_t, int64_t> indexOf;
  for (auto [i, program] : llvm::enumerate(set.programs)) {
    if (!indexOf.try_emplace(program.getDevice(), i).second)
      return program.emitError()
             << "a second program for device " << program.getDevice();
  }

  int64_t steps = runSteps(set.programs);
  bool ok = true;
  auto peerIndex = [&](Operation *op, int64_t peer) -> int64_t {
    auto it = indexOf.find(peer);
    if (it != indexOf.end())
      return it->second;
    op->emitError() << "device " << peer << " has no pipe.program";
    ok = false;
    return -1;
  };

  for (pipe::ProgramOp program : set.programs) {
    sched::Program list;
    SmallVector<Operation *> ops;
    SmallVector<int64_t> mbs;
    pipe::forEachInstructionInRun(program, steps, [&](Operation *opPtr,
                                                      int64_t mb) {
      Operation &op = *opPtr;
      sched::Instr instr;
      if (auto fwd = dyn_cast<pipe::ForwardOp>(op)) {
        instr = sched::Instr::forward(calleeStage(&op, fwd.getCalleeAttr()), mb);
      } else if (auto bwd = dyn_cast<pipe::BackwardOp>(op)) {
        instr = sched::Instr::backward(calleeStage(&op, bwd.getCalleeAttr()), mb);
        if (bwd.getPart() == pipe::BackwardPart::Input)
          instr.kind = sched::InstrKind::BackwardInput;
        else if (bwd.getPart() == pipe::BackwardPart::Weight)
          instr.kind = sched::InstrKind::BackwardWeight;
      } else if (auto send = dyn_cast<pipe::SendOp>(op)) {
        instr = sched::Instr::send(peerIndex(&op, send.getPeer()), mb,
                                   send.getTag().str(),
                                   typeString(send.getValue().getType()));
      } else if (auto recv = dyn_cast<pipe::RecvOp>(op)) {
        instr = sched::Instr::recv(peerIndex(&op, recv.getPeer()), mb,
                                   recv.getTag().str(),
                                   typeString(recv.getValue().getType()));
      } else if (isa<pipe::UpdateOp>(op)) {
        instr = sched::Instr::update(-1);
      } else if (isa<pipe::AllReduceOp, pipe::AverageOp, pipe::ClipGradNormOp>(op)) {
        // Collectives: matched in order among their group.
        std::vector<int64_t> members;
        for (int64_t device : collectiveGroup(&op))
          members.push_back(peerIndex(&op, device));
        llvm::sort(members);
        instr = sched::Instr::collective(std::move(members),
                                         op.getName().stripDialect().str());
        // What the members must agree on (their numbers would differ).
        std::string what;
        llvm::raw_string_ostream os(what);
        if (auto clip = dyn_cast<pipe::ClipGradNormOp>(op))
          os << "max " << clip.getMaxNorm().convertToDouble();
        else if (auto red = dyn_cast<pipe::AllReduceOp>(op))
          os << pipe::stringifyReduceKind(red.getReduction());
        else if (auto avg = dyn_cast<pipe::AverageOp>(op))
          os << "alpha " << avg.getAlpha().convertToDouble() << " period "
             << avg.getPeriod();
        instr.payload = what;
      }

      // A whole-batch stage's forward or backward (--batchnorm full-batch)
      // runs all M micro-batches at once: M instructions in a row.
      int64_t copies = 1;
      if (instr.isCompute() && op.hasAttr(wholebatch::kWholeBatch))
        copies = program.getMicrobatches();
      for (int64_t k = 0; k < copies; ++k) {
        sched::Instr one = instr;
        if (copies > 1)
          one.mb = mb + k;
        list.push_back(std::move(one));
        ops.push_back(&op);
        mbs.push_back(copies > 1 ? mb + k : mb);
      }
    });
    set.devices.push_back(std::move(list));
    set.ops.push_back(std::move(ops));
    set.mbs.push_back(std::move(mbs));
  }
  if (!ok)
    return failure();
  return set;
}

std::string mlir::pipec::describeInstruction(Operation *op, int64_t mb) {
  std::string s;
  llvm::raw_string_ostream os(s);
  if (auto send = dyn_cast<pipe::SendOp>(op))
    os << "send of mb " << mb << " tag \"" << send.getTag() << "\" to device "
       << send.getPeer();
  else if (auto recv = dyn_cast<pipe::RecvOp>(op))
    os << "recv of mb " << mb << " tag \"" << recv.getTag()
       << "\" from device " << recv.getPeer();
  else if (auto fwd = dyn_cast<pipe::ForwardOp>(op))
    os << "forward " << fwd.getCalleeAttr() << " of mb " << mb;
  else if (auto bwd = dyn_cast<pipe::BackwardOp>(op))
    os << "backward " << bwd.getCalleeAttr() << " of mb " << mb;
  else if (auto save = dyn_cast<pipe::SaveOp>(op))
    os << "save of mb " << mb;
  else if (auto restore = dyn_cast<pipe::RestoreOp>(op))
    os << "restore of mb " << mb;
  else if (auto program = dyn_cast<pipe::ProgramOp>(op))
    os << "end of the program of device " << program.getDevice();
  else if (isa<pipe::AllReduceOp, pipe::AverageOp, pipe::ClipGradNormOp>(op)) {
    os << op->getName() << " among [";
    llvm::interleaveComma(collectiveGroup(op), os);
    os << "]";
  } else
    os << op->getName();
  return s;
}

void mlir::pipec::emitSimulationFailure(const ProgramSet &set,
                                        const sched::SimulationFailure &failure,
                                        bool bufferedSends) {
  Operation *first = set.opAt(failure.first);
  Operation *second = failure.second ? set.opAt(*failure.second) : nullptr;
  int64_t firstDevice = set.deviceOf(failure.first.device);
  int64_t secondDevice =
      failure.second ? set.deviceOf(failure.second->device) : -1;
  bool secondIsEnd = second && isa<pipe::ProgramOp>(second);

  switch (failure.kind) {
  case sched::SimulationFailure::Deadlock: {
    InFlightDiagnostic diag = first->emitError();
    diag << "deadlock: device " << firstDevice << " waits in this "
         << set.describe(failure.first);
    if (secondIsEnd)
      diag << ", but device " << secondDevice
           << " finishes its program without a matching "
           << (isa<pipe::RecvOp>(first)   ? "send"
               : isa<pipe::SendOp>(first) ? "recv"
                                          : "collective");
    else
      diag << ", while device " << secondDevice << " waits in its "
           << set.describe(*failure.second);
    if (!bufferedSends && !secondIsEnd &&
        (isa<pipe::SendOp>(first) || isa<pipe::SendOp>(second)))
      diag << " (a send blocks until its peer receives it)";
    diag.attachNote(second->getLoc())
        << (secondIsEnd ? "the program of device " : "device ")
        << secondDevice << (secondIsEnd ? " ends here" : " waits here");
    return;
  }
  case sched::SimulationFailure::PayloadMismatch: {
    if (!isa<pipe::RecvOp>(first)) {
      // Two devices' collectives that disagree (pipe.clip_grad_norm's max).
      InFlightDiagnostic diag = first->emitError();
      diag << "this " << set.describe(failure.first) << " (" << set.payloadAt(failure.first)
           << ") does not match device " << secondDevice << "'s ("
           << set.payloadAt(*failure.second) << ")";
      diag.attachNote(second->getLoc()) << "device " << secondDevice << "'s";
      return;
    }
    auto recv = cast<pipe::RecvOp>(first);
    auto send = cast<pipe::SendOp>(second);
    InFlightDiagnostic diag = first->emitError();
    diag << "this recv of mb " << set.mbAt(failure.first) << " tag \""
         << recv.getTag()
         << "\" expects " << recv.getValue().getType() << " but device "
         << secondDevice << " sends " << send.getValue().getType();
    diag.attachNote(second->getLoc()) << "the matching send";
    return;
  }
  case sched::SimulationFailure::UnreceivedSend: {
    InFlightDiagnostic diag = first->emitError();
    diag << "this " << set.describe(failure.first)
         << " is never received: device " << secondDevice
         << " finishes its program without a matching recv";
    diag.attachNote(second->getLoc())
        << "the program of device " << secondDevice << " ends here";
    return;
  }
  case sched::SimulationFailure::BadPeer:
    first->emitError() << "this " << set.describe(failure.first)
                       << " names device " << firstDevice
                       << " itself or no device";
    return;
  }
}
