//===- PipeAttrNames.h - names of the pipe.* attributes ---------*- C++ -*-===//
//
// The names of the discardable attributes PipeBase.td declares, as
// constants: passes name them through these, never as string literals.
// `pipe::attrs::kStage` is "pipe.stage", and so on.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEC_DIALECTS_PIPE_PIPEATTRNAMES_H
#define PIPEC_DIALECTS_PIPE_PIPEATTRNAMES_H

#include "dialects/pipe/PipeDialect.h"

namespace mlir::pipec::pipe::attrs {
inline constexpr ::llvm::StringLiteral kStage =
    PipeDialect::StageAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kCost =
    PipeDialect::CostAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kRecompute =
    PipeDialect::RecomputeAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kGradSum =
    PipeDialect::GradSumAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kGradOperand =
    PipeDialect::GradOperandAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kClip =
    PipeDialect::ClipAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kMicrobatches =
    PipeDialect::MicrobatchesAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kBatchSize =
    PipeDialect::BatchSizeAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kLossScale =
    PipeDialect::LossScaleAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kLossCombine =
    PipeDialect::LossCombineAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kOptimizer =
    PipeDialect::OptimizerAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kTransfers =
    PipeDialect::TransfersAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kNumStages =
    PipeDialect::NumStagesAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kStageCosts =
    PipeDialect::StageCostsAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kProducer =
    PipeDialect::ProducerAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kOpset =
    PipeDialect::OpsetAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kPeakInFlight =
    PipeDialect::PeakInFlightAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kDevice =
    PipeDialect::DeviceAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kPeakBytes =
    PipeDialect::PeakBytesAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kPackNext =
    PipeDialect::PackNextAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kProgram =
    PipeDialect::ProgramAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kName =
    PipeDialect::NameAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kParam =
    PipeDialect::ParamAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kInput =
    PipeDialect::InputAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kLossMean =
    PipeDialect::LossMeanAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kStepInput =
    PipeDialect::StepInputAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kWholeStep =
    PipeDialect::WholeStepAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kGrad =
    PipeDialect::GradAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kState =
    PipeDialect::StateAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kLoss =
    PipeDialect::LossAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kTrainable =
    PipeDialect::TrainableAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kStep =
    PipeDialect::StepAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kOutput =
    PipeDialect::OutputAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kResultBuffer =
    PipeDialect::ResultBufferAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kClassificationLosses =
    PipeDialect::ClassificationLossesAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kMetric =
    PipeDialect::MetricAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kInit =
    PipeDialect::InitAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kUpdate =
    PipeDialect::UpdateAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kTiedStages =
    PipeDialect::TiedStagesAttrHelper::getNameStr();
inline constexpr ::llvm::StringLiteral kUpdateBinding =
    PipeDialect::UpdateBindingAttrHelper::getNameStr();
} // namespace mlir::pipec::pipe::attrs

#endif
