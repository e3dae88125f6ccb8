//===- PartitionPasses.h - pipeline partitioning passes ---------*- C++ -*-===//
//
// The passes of PipecPartition (pipe-assign-stages). They are declared with
// all the transforms passes in Passes.td; this header only includes Passes.h.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEC_TRANSFORMS_PARTITIONPASSES_H
#define PIPEC_TRANSFORMS_PARTITIONPASSES_H

#include "pipec/Transforms/Passes.h"

#endif // PIPEC_TRANSFORMS_PARTITIONPASSES_H
