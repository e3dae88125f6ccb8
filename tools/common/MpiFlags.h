//===- MpiFlags.h - how the tools launch ranks under mpirun -----*- C++ -*-===//
//
// pipe-run and pipe-profile start their ranks with Open MPI's shared-memory
// transport (vader) between the ranks of this machine, oversubscribed
// (fewer cores than ranks is fine), as root in containers. Large messages
// use cross-memory attach (CMA: the receiver copies straight out of the
// sender's memory, process_vm_readv) where this machine allows it: then a
// message of more than 4 KB reaches a receiver while its sender computes,
// which without it waits until the sender next calls MPI (a 30 KB receive
// took 200 ms against a sender busy for 200 ms; 0.2 ms with CMA). In a
// container without the ptrace capability CMA fails, so it is probed first.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEC_TOOLS_COMMON_MPIFLAGS_H
#define PIPEC_TOOLS_COMMON_MPIFLAGS_H

#include <cstdint>
#include <string>
#include <vector>

namespace pipectools {

/// Whether one process may read a sibling's memory with process_vm_readv
/// (what Open MPI's CMA single copy does between ranks, each of which lets
/// any process trace it). Probed once, with two forked children.
bool crossMemoryAttachWorks();

/// The single-copy mechanism the ranks get: PIPEC_SINGLE_COPY (cma or none)
/// where set, else cma where crossMemoryAttachWorks, else none.
std::string singleCopyMechanism();

/// The largest message whose pipert_send returns before its receiver takes
/// it, for `ranks` ranks this machine launches (runtime/cpu/comm/mpi_comm.cpp),
/// 0 for none: through the shared-memory rings up to a quarter of a ring
/// (PIPERT_SHM_RING, else 1 MiB, smaller for more than 4 ranks, none past
/// 16: 256 KiB at 2-4 ranks; none with PIPERT_SHM=0), and buffered through
/// MPI up to PIPERT_SEND_BUFFER/16 (4 MiB) with single copy or where
/// PIPERT_SEND_BUFFER is set (> 0). What the planner and pipe-simulate model.
int64_t runtimeBufferedSendBytes(int ranks = 2);
/// runtimeBufferedSendBytes(ranks) > 0.
bool runtimeBuffersSends(int ranks = 2);

/// mpirun's flags for ranks on this machine: --oversubscribe, --mca btl
/// self,vader, the single-copy mechanism (cma where crossMemoryAttachWorks,
/// else none; PIPEC_SINGLE_COPY=cma|none overrides), vader's eager limit
/// raised to its fragment size, 32 KB (unless OMPI_MCA_btl_vader_eager_limit
/// is set), --allow-run-as-root as root.
std::vector<std::string> sharedMemoryMpiFlags();

} // namespace pipectools

#endif // PIPEC_TOOLS_COMMON_MPIFLAGS_H
