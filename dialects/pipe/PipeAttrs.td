//===- PipeAttrs.td - pipe dialect attributes ------------------*- tablegen -*-===//
#ifndef PIPEC_PIPE_ATTRS
#define PIPEC_PIPE_ATTRS

include "dialects/pipe/PipeBase.td"
include "mlir/IR/EnumAttr.td"

// The strings are the names the command lines use (`--schedule=1f1b`).
def Pipe_ScheduleKind : I32EnumAttr<"ScheduleKind", "pipeline schedule", [
    I32EnumAttrCase<"GPipe", 0, "gpipe">,
    I32EnumAttrCase<"OneFOneB", 1, "1f1b">,
    I32EnumAttrCase<"Interleaved1F1B", 2, "interleaved_1f1b">,
    I32EnumAttrCase<"ZeroBubbleH1", 3, "zb_h1">,
    I32EnumAttrCase<"ZeroBubbleH2", 4, "zb_h2">,
    I32EnumAttrCase<"PipeDream", 5, "pipedream">,
    I32EnumAttrCase<"PipeDream2BW", 6, "pipedream_2bw">,
    I32EnumAttrCase<"PipeMare", 7, "pipemare">,
    I32EnumAttrCase<"SpecTrain", 8, "spectrain">,
    I32EnumAttrCase<"AvgPipe", 9, "avgpipe">,
    // AvgPipe's advance forward propagation: 1F1B with `advance` more
    // warm-up forwards.
    I32EnumAttrCase<"AdvanceForward", 10, "afp">]> {
  let cppNamespace = "::mlir::pipec::pipe";
  let genSpecializedAttr = 0;
}
// Printed as a string by pipe.program: "1f1b" is not a keyword.
def Pipe_ScheduleKindAttr : EnumAttr<Pipe_Dialect, Pipe_ScheduleKind, "schedule"> {
  let assemblyFormat = "`<` custom<ScheduleName>($value) `>`";
}

def Pipe_Phase : I32EnumAttr<"Phase", "phase of a stage computation", [
    I32EnumAttrCase<"Forward", 0, "forward">,
    // Input and weight gradients together.
    I32EnumAttrCase<"Backward", 1, "backward">,
    // Zero-bubble split: B computes input gradients only ...
    I32EnumAttrCase<"BackwardInput", 2, "backward_input">,
    // ... and W the weight gradients only.
    I32EnumAttrCase<"BackwardWeight", 3, "backward_weight">]> {
  let cppNamespace = "::mlir::pipec::pipe";
  let genSpecializedAttr = 0;
}
def Pipe_PhaseAttr : EnumAttr<Pipe_Dialect, Pipe_Phase, "phase"> {
  let assemblyFormat = "$value";
}

def Pipe_BackwardPart : I32EnumAttr<"BackwardPart", "which gradients a backward computes", [
    I32EnumAttrCase<"Full", 0, "full">,
    I32EnumAttrCase<"Input", 1, "input">,
    I32EnumAttrCase<"Weight", 2, "weight">]> {
  let cppNamespace = "::mlir::pipec::pipe";
  let genSpecializedAttr = 0;
}
def Pipe_BackwardPartAttr : EnumAttr<Pipe_Dialect, Pipe_BackwardPart, "backward_part"> {
  let assemblyFormat = "$value";
}

def Pipe_OptimizerKind : I32EnumAttr<"OptimizerKind", "optimizer", [
    I32EnumAttrCase<"SGD", 0, "sgd">,
    I32EnumAttrCase<"Momentum", 1, "momentum">,
    I32EnumAttrCase<"Nesterov", 2, "nesterov">,
    I32EnumAttrCase<"Adam", 3, "adam">,
    I32EnumAttrCase<"AdamW", 4, "adamw">,
    I32EnumAttrCase<"Adagrad", 5, "adagrad">]> {
  let cppNamespace = "::mlir::pipec::pipe";
  let genSpecializedAttr = 0;
}
def Pipe_OptimizerKindAttr : EnumAttr<Pipe_Dialect, Pipe_OptimizerKind, "optimizer"> {
  let assemblyFormat = "$value";
}

// How a forward, backward or update names the weight version it reads:
// `slot` (a fixed slot of the buffer, synchronous schedules), or a version
// relative to the instruction's global micro-batch u (`u - 2`) or step t
// (`t - 1`), for the no-flush methods (PipeDream, 2BW).
def Pipe_VersionClock : I32EnumAttr<"VersionClock", "weight version clock", [
    I32EnumAttrCase<"Slot", 0, "slot">,
    I32EnumAttrCase<"MicroBatch", 1, "u">,
    I32EnumAttrCase<"Step", 2, "t">]> {
  let cppNamespace = "::mlir::pipec::pipe";
  let genSpecializedAttr = 0;
}
def Pipe_VersionClockAttr : EnumAttr<Pipe_Dialect, Pipe_VersionClock, "version_clock"> {
  let assemblyFormat = "$value";
}

// What pipe.predict extrapolates along: the optimizer's step direction
// (SpecTrain: W - gap*lr*v) or the weights' own running velocity (PipeMare's
// discrepancy correction: W - gap*delta).
def Pipe_PredictDirection : I32EnumAttr<"PredictDirection", "prediction direction", [
    I32EnumAttrCase<"Velocity", 0, "velocity">,
    I32EnumAttrCase<"Delta", 1, "delta">]> {
  let cppNamespace = "::mlir::pipec::pipe";
  let genSpecializedAttr = 0;
}
def Pipe_PredictDirectionAttr : EnumAttr<Pipe_Dialect, Pipe_PredictDirection, "predict_direction"> {
  let assemblyFormat = "$value";
}

def Pipe_ReduceKind : I32EnumAttr<"ReduceKind", "reduction", [
    I32EnumAttrCase<"Sum", 0, "sum">,
    I32EnumAttrCase<"Mean", 1, "mean">]> {
  let cppNamespace = "::mlir::pipec::pipe";
  let genSpecializedAttr = 0;
}
def Pipe_ReduceKindAttr : EnumAttr<Pipe_Dialect, Pipe_ReduceKind, "reduce"> {
  let assemblyFormat = "$value";
}

#endif // PIPEC_PIPE_ATTRS
