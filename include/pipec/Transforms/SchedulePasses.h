//===- SchedulePasses.h - pipeline scheduling passes ------------*- C++ -*-===//
//
// The passes of PipecSchedule (pipe-schedule, pipe-verify-schedule,
// pipe-print-schedule). They are declared with all the transforms passes in
// Passes.td; this header only includes Passes.h.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEC_TRANSFORMS_SCHEDULEPASSES_H
#define PIPEC_TRANSFORMS_SCHEDULEPASSES_H

#include "pipec/Transforms/Passes.h"

#endif // PIPEC_TRANSFORMS_SCHEDULEPASSES_H
