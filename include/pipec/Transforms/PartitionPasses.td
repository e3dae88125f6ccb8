//===- PartitionPasses.td - partitioning passes ---------*- tablegen -*-===//
#ifndef PIPEC_TRANSFORMS_PARTITIONPASSES
#define PIPEC_TRANSFORMS_PARTITIONPASSES

include "mlir/Pass/PassBase.td"

def PipeAssignStages : Pass<"pipe-assign-stages", "::mlir::ModuleOp"> {
  let summary = "splits a function into pipeline stages (pipe.stage)";
  let description = [{
    Gives every op of `func.func @<func-name>` an attribute
    `pipe.stage = i : i64` so that every value flows from a stage to the same
    or a later one. The ops on per-sample data are split contiguously in
    their order; the others "float": constants, and pure ops computed from
    weights (`pipe.param` / `pipe.state` arguments) and constants alone,
    like a weight's Transpose, take the earliest stage of their users (a
    later stage using them too recomputes them, as constants are
    duplicated), so a cut never separates a weight from its preparation.
    The terminator gets the last stage.

    Strategies:
    - `balanced`: a contiguous split of the op sequence minimizing the most
      expensive stage (forward + backward time of the cost model, see
      pipec/Analysis/CostModel.h). Cuts are only allowed where few bytes of
      activations cross them: a cut is eligible when its crossing bytes are
      at most `cut-slack` times the smallest crossing of the function; the
      threshold is doubled until the best split over eligible cuts is
      within `tolerance` of the best split over all cuts. Among splits of
      equal (within 1e-9) maximum cost, the one whose cuts carry the fewest
      activation bytes wins. Exact: a dynamic program over cut points.
    - `dp`: PipeDream's dynamic program (one worker per stage, no
      replication) over the layers the eligible cuts delimit:
      A(j, s) = min_i max(A(i, s-1), 2 a_i / B, T(i+1..j)), with a_i the
      bytes crossing cut i and B the link bandwidth.
    - `manual`: with `cuts`, a new stage starts after each op whose ONNX
      node name (its NameLoc) is listed, in program order; without `cuts`,
      the `pipe.stage` attributes already on ops are kept and the ops without
      one get the latest stage of their operands.
    - `layers`: finds the repeated block of a transformer from the node
      names (`/blocks.<i>/...`, `layers.<i>.`, `h.<i>.`: a prefix `<word>.<i>`
      with the most distinct indices) and gives each stage an equal number
      of blocks (the first `blocks % stages` stages one more); ops before the
      first block (embedding) go with the first, ops after the last (head,
      loss) with the last.

    A training step (a function with `pipe.grad` / `pipe.update` results,
    as --pipe-autodiff / --pipe-add-optimizer build it): the forward ops
    (those its `pipe.loss` result depends on) are partitioned as above; then
    an update (an op whose result is a `pipe.update` result and that reads a
    parameter) goes with the parameter's owner stage, and every other
    backward op with the forward op whose location (else ONNX node name) it
    carries; failing both, with the earliest gradient it reads, else the
    latest forward value. Gradients flow to the same or an earlier stage.

    Also set: on every `pipe.param` (and `pipe.state`) argument,
    `pipe.stage = owner : i64`
    (the stage of its first use); where a parameter is used by several
    stages (tied weights), `pipe.tied_stages = [s, ...]`; on the function,
    `pipe.stage_costs = [...]` (f64, estimated forward + backward time of
    each stage per micro-batch, in microseconds; a floating op counts in the
    stage of its first user) and `pipe.num_stages`. With `annotate-costs`,
    every op also gets `pipe.cost = {backward_factor, bytes, flops,
    param_bytes}` (the forward numbers of the cost model).
  }];
  let options = [
    Option<"funcName", "func-name", "std::string", "\"forward\"",
           "the function to partition">,
    Option<"stages", "stages", "int64_t", "0",
           "number of stages (0: with strategy=manual, from cuts or the "
           "existing attributes; else 2)">,
    Option<"strategy", "strategy", "std::string", "\"balanced\"",
           "balanced, dp, manual or layers">,
    ListOption<"cuts", "cuts", "std::string",
               "strategy=manual: ONNX node names after which a stage ends">,
    Option<"cutSlack", "cut-slack", "double", "2.0",
           "balanced/dp: a cut is eligible when its crossing bytes are at "
           "most this times the smallest crossing">,
    Option<"tolerance", "tolerance", "double", "0.1",
           "balanced/dp: accepted excess of the max stage cost over the "
           "unrestricted optimum before more cut points are admitted">,
    Option<"peakGflops", "peak-gflops", "double", "100000.0",
           "cost model: peak arithmetic rate, GFLOP/s">,
    Option<"memoryGBps", "memory-gbps", "double", "2000.0",
           "cost model: memory bandwidth, GB/s">,
    Option<"linkGBps", "link-gbps", "double", "25.0",
           "cost model: bandwidth between stages, GB/s (dp)">,
    Option<"annotateCosts", "annotate-costs", "bool", "false",
           "also write each op's cost-model numbers as pipe.cost = {flops, "
           "bytes, param_bytes, backward_factor}">,
  ];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

#endif // PIPEC_TRANSFORMS_PARTITIONPASSES
