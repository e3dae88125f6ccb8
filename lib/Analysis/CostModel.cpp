//===- CostModel.cpp - static cost of onnx ops ----------------------------===//
//
// Ops are classified by name rather than by C++ class so that the model
// covers the gradient and optimizer ops too without depending on which of
// them a build has; attributes are read from the attribute dictionary (the
// onnx dialect keeps them there).
//
//===----------------------------------------------------------------------===//
#include "pipec/Analysis/CostModel.h"
#include "pipec/Analysis/Profile.h"
#include "dialects/onnx/OnnxDialect.h"
#include "dialects/onnx/ShapeHelpers.h"
#include "dialects/pipe/PipeAttrNames.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace mlir::pipec;

std::optional<int64_t> CostModel::getNumElements(Value value) {
  if (isa<NoneType>(value.getType()))
    return 0;
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || !type.hasStaticShape())
    return std::nullopt;
  return type.getNumElements();
}

static int64_t elementBytes(Type type) {
  if (type.isIntOrFloat())
    return std::max<int64_t>(1, (type.getIntOrFloatBitWidth() + 7) / 8);
  if (auto complex = dyn_cast<ComplexType>(type))
    return 2 * elementBytes(complex.getElementType());
  return 8; // index and the like
}

std::optional<int64_t> CostModel::getValueBytes(Value value) {
  if (isa<NoneType>(value.getType()))
    return 0;
  std::optional<int64_t> elements = getNumElements(value);
  if (!elements)
    return std::nullopt;
  auto type = cast<ShapedType>(value.getType());
  return *elements * elementBytes(type.getElementType());
}

bool CostModel::isParam(Value value) {
  auto arg = dyn_cast<BlockArgument>(value);
  if (!arg)
    return false;
  auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
  return func && arg.getOwner()->isEntryBlock() &&
         func.getArgAttr(arg.getArgNumber(), pipe::attrs::kParam);
}

int64_t CostModel::getParamBytes(Operation *op) {
  int64_t bytes = 0;
  SmallPtrSet<Value, 4> seen;
  for (Value operand : op->getOperands())
    if (isParam(operand) && seen.insert(operand).second)
      bytes += getValueBytes(operand).value_or(0);
  return bytes;
}

StringRef CostModel::getNodeName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().strref();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (StringRef name = getNodeName(inner); !name.empty())
        return name;
  if (auto callSite = dyn_cast<CallSiteLoc>(loc))
    return getNodeName(callSite.getCallee());
  return {};
}

std::optional<double> CostModel::measured(Operation *op, bool backward) const {
  if (!options.profile)
    return std::nullopt;
  StringRef node = getNodeName(op->getLoc());
  if (node.empty())
    return std::nullopt;
  // A node the profile does not list ran no kernel of its own in the
  // profiled program (an alias, or folded into another node's kernel: a
  // linear layer's weight Transpose and bias Add into its Gemm).
  if (!options.profile->ops.count(node))
    return 0.0;
  std::optional<double> time =
      backward ? options.profile->backwardAt(node, options.profileSamples)
               : options.profile->forwardAt(node, options.profileSamples);
  if (!time)
    return std::nullopt;
  Operation *scope = op->getParentOp();
  auto [it, inserted] = nodeOps.try_emplace(scope);
  if (inserted && scope)
    scope->walk([&](Operation *other) {
      if (other != scope)
        if (StringRef name = getNodeName(other->getLoc()); !name.empty())
          ++it->second[name];
    });
  int64_t count = std::max<int64_t>(1, it->second.lookup(node));
  return *time / double(count);
}

double CostModel::getForwardTime(Operation *op) const {
  if (std::optional<double> time = measured(op, /*backward=*/false))
    return *time;
  return getForwardTime(getOpCost(op));
}

double CostModel::getBackwardTime(Operation *op) const {
  if (std::optional<double> time = measured(op, /*backward=*/true))
    return *time;
  return getBackwardTime(getOpCost(op));
}

double CostModel::getForwardTime(const OpCost &cost) const {
  return cost.flops / options.peakFlops +
         double(cost.bytes()) / options.memoryBandwidth;
}

namespace {
enum class Kind {
  Free,         // constants: materialized once, nothing per step
  Contraction,  // Gemm, MatMul, Conv: weighted backward
  Elementwise,  // one flop per output element (times a small constant)
  Normalize,    // softmax, norms, losses: a few passes over the input
  Pool,         // one flop per window element
  Reduce,       // one flop per input element
  DataMovement, // no arithmetic, only bytes
  Recurrent,    // LSTM, GRU: GEMMs per step plus the gate math
  Attention,    // two batched GEMMs per head and a softmax
  Backward,     // a gradient op the autodiff emitted
  Optimizer,    // an update op
  Unknown,
};
} // namespace

static Kind classify(StringRef name) {
  return llvm::StringSwitch<Kind>(name)
      .Cases({"Constant", "NoValue"}, Kind::Free)
      .Cases({"Gemm", "MatMul", "Conv", "ConvTranspose"}, Kind::Contraction)
      .Cases({"LSTM", "GRU"}, Kind::Recurrent)
      .Case("Attention", Kind::Attention)
      .Cases({"Add", "Sub", "Mul", "Div", "Pow", "Relu", "Neg", "Tanh",
              "Sigmoid", "Erf", "Sqrt", "Exp", "Log", "Sin", "Cos", "Where", "Equal",
              "Cast", "Dropout", "Abs", "Reciprocal", "Sign", "Floor", "Ceil",
              "Softplus", "HardSwish", "Not", "LeakyRelu", "Elu", "Selu",
              "HardSigmoid", "Gelu", "Clip", "Max", "Min", "Mod", "Less",
              "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or"},
             Kind::Elementwise)
      .Cases({"Softmax", "LogSoftmax", "LayerNormalization",
              "BatchNormalization", "SoftmaxCrossEntropyLoss",
              "NegativeLogLikelihoodLoss"},
             Kind::Normalize)
      .Cases({"MaxPool", "AveragePool", "GlobalAveragePool", "Resize"},
             Kind::Pool)
      .Cases({"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ArgMax",
              "ArgMin", "CumSum"},
             Kind::Reduce)
      .Cases({"Reshape", "Flatten", "Transpose", "Concat", "Split", "Slice",
              "Gather", "Unsqueeze", "Squeeze", "Expand", "Identity", "Shape",
              "ConstantOfShape", "Range", "Tile", "Pad", "Trilu", "GatherND",
              "ScatterND", "GatherElements", "ScatterElements"},
             Kind::DataMovement)
      .Cases({"ReluGrad", "TanhGrad", "SigmoidGrad", "ErfGrad", "UnaryGrad",
              "ReduceToShape", "SoftmaxGrad", "LogSoftmaxGrad",
              "LayerNormalizationGrad", "BatchNormalizationGrad", "ConvGrad",
              "MaxPoolGrad", "AveragePoolGrad", "GlobalAveragePoolGrad",
              "SliceGrad", "GatherGrad", "DropoutGrad", "ReduceExtremumGrad",
              "TileGrad", "PadGrad", "ResizeGrad", "GatherNDGrad", "ScatterNDGrad",
              "GatherElementsGrad", "ScatterElementsGrad",
              "SoftmaxCrossEntropyLossGrad",
              "NegativeLogLikelihoodLossGrad", "LSTMGrad", "GRUGrad",
              "AttentionGrad"},
             Kind::Backward)
      .Cases({"SGD", "Momentum", "Adam", "AdamW", "Adagrad"}, Kind::Optimizer)
      .Default(Kind::Unknown);
}

static std::optional<ArrayRef<int64_t>> staticShape(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || !type.hasStaticShape())
    return std::nullopt;
  return type.getShape();
}

static int64_t getI64Attr(Operation *op, StringRef name, int64_t dflt) {
  if (auto attr = op->getAttrOfType<IntegerAttr>(name))
    return attr.getInt();
  return dflt;
}

/// Product of the `kernel_shape` attribute (or of W's spatial dims).
static std::optional<int64_t> kernelVolume(Operation *op) {
  if (auto kernel = op->getAttrOfType<DenseI64ArrayAttr>("kernel_shape")) {
    int64_t volume = 1;
    for (int64_t k : kernel.asArrayRef())
      volume *= k;
    return volume;
  }
  return std::nullopt;
}

/// Elements of the largest floating-point result (optimizer and gradient
/// ops have several results of different sizes).
static std::optional<int64_t> totalResultElements(Operation *op) {
  int64_t total = 0;
  for (Value result : op->getResults()) {
    std::optional<int64_t> n = CostModel::getNumElements(result);
    if (!n)
      return std::nullopt;
    total += *n;
  }
  return total;
}

/// FLOPs of the contractions; nullopt where a shape is not static.
static std::optional<double> contractionFlops(Operation *op, StringRef name) {
  if (op->getNumResults() < 1)
    return std::nullopt;
  std::optional<int64_t> outElems = CostModel::getNumElements(op->getResult(0));
  if (!outElems)
    return std::nullopt;
  if (name == "Gemm") {
    auto a = staticShape(op->getOperand(0));
    if (!a || a->size() != 2)
      return std::nullopt;
    int64_t k = getI64Attr(op, "transA", 0) ? (*a)[0] : (*a)[1];
    bool hasC = op->getNumOperands() > 2 &&
                !isa<NoneType>(op->getOperand(2).getType());
    return 2.0 * double(*outElems) * double(k) + (hasC ? double(*outElems) : 0);
  }
  if (name == "MatMul") {
    auto a = staticShape(op->getOperand(0));
    if (!a || a->empty())
      return std::nullopt;
    return 2.0 * double(*outElems) * double(a->back());
  }
  // Conv: Y (N x M x D...) from W (M x C/g x k...): every output element is a
  // dot product of C/g * prod(k) terms, i.e. numel(W) / M.
  auto w = staticShape(op->getOperand(1));
  if (!w || w->empty() || (*w)[0] == 0)
    return std::nullopt;
  int64_t wElems = 1;
  for (int64_t d : *w)
    wElems *= d;
  bool hasB = op->getNumOperands() > 2 &&
              !isa<NoneType>(op->getOperand(2).getType());
  if (name == "ConvTranspose") {
    // Every input element (N x C x D...) scatters into M/g * prod(k)
    // outputs through W (C x M/g x k...): numel(W) / C terms.
    std::optional<int64_t> inElems =
        CostModel::getNumElements(op->getOperand(0));
    if (!inElems)
      return std::nullopt;
    return 2.0 * double(*inElems) * double(wElems / (*w)[0]) +
           (hasB ? double(*outElems) : 0);
  }
  return 2.0 * double(*outElems) * double(wElems / (*w)[0]) +
         (hasB ? double(*outElems) : 0);
}

/// Forward FLOPs of an LSTM / GRU (or of the forward its gradient op
/// recomputes): per direction and step the input and recurrent GEMMs,
/// 2 * B * G*H * (I + H), and about 10 (LSTM) / 8 (GRU) flops per hidden
/// unit of gate math. Operands X (T, B, I), W (D, G*H, I), R (D, G*H, H).
static std::optional<double> recurrentFlops(Operation *op, bool lstm) {
  auto x = staticShape(op->getOperand(0)), w = staticShape(op->getOperand(1)),
       r = staticShape(op->getOperand(2));
  if (!x || !w || !r || x->size() != 3 || w->size() != 3 || r->size() != 3)
    return std::nullopt;
  double T = double((*x)[0]), B = double((*x)[1]), I = double((*x)[2]);
  double D = double((*w)[0]), GH = double((*w)[1]), H = double((*r)[2]);
  return D * T * B * (2 * GH * (I + H) + (lstm ? 10 : 8) * H);
}

/// An Attention's (or AttentionGrad's) forward flops: Q Kᵀ and P V per
/// batch and head, and the softmax's ~5 per score.
static std::optional<double> attentionFlops(Operation *op) {
  auto heads = op->getAttrOfType<IntegerAttr>("q_num_heads");
  ScopedDiagnosticHandler quiet(op->getContext(),
                                [](Diagnostic &) { return success(); });
  auto z = onnx::attentionSizes(
      op, op->getOperand(0), op->getOperand(1), op->getOperand(2),
      heads ? std::optional<int64_t>(heads.getInt()) : std::nullopt, std::nullopt);
  if (failed(z))
    return std::nullopt;
  for (int64_t d : {z->batch, z->heads, z->t, z->s, z->dh})
    if (ShapedType::isDynamic(d))
      return std::nullopt;
  double scores = double(z->batch) * double(z->heads) * double(z->t) * double(z->s);
  return scores * (4.0 * double(z->dh) + 5.0);
}

OpCost CostModel::getOpCost(Operation *op) const {
  OpCost cost;
  if (op->getDialect() == nullptr ||
      op->getDialect()->getNamespace() != "onnx") {
    // func.return and the like: bookkeeping, not compute.
    cost.backwardFactor = 0;
    return cost;
  }
  StringRef name = op->getName().stripDialect();
  Kind kind = classify(name);
  if (kind == Kind::Free) {
    cost.backwardFactor = 0;
    return cost;
  }

  for (Value operand : op->getOperands()) {
    if (std::optional<int64_t> bytes = getValueBytes(operand))
      cost.inputBytes += *bytes;
    else
      cost.known = false;
  }
  for (Value result : op->getResults()) {
    if (std::optional<int64_t> bytes = getValueBytes(result))
      cost.outputBytes += *bytes;
    else
      cost.known = false;
  }
  cost.paramBytes = getParamBytes(op);

  auto numel = [&](Value v) -> double {
    std::optional<int64_t> n = getNumElements(v);
    if (!n)
      cost.known = false;
    return double(n.value_or(0));
  };
  double out = op->getNumResults() ? numel(op->getResult(0)) : 0;
  double in = op->getNumOperands() ? numel(op->getOperand(0)) : 0;

  switch (kind) {
  case Kind::Free:
    break;
  case Kind::Contraction:
    if (std::optional<double> flops = contractionFlops(op, name))
      cost.flops = *flops;
    else
      cost.known = false;
    cost.backwardFactor = options.weightedBackwardFactor;
    break;
  case Kind::Elementwise:
    cost.flops = (name == "Dropout" ? 2 : 1) * out;
    cost.backwardFactor = options.backwardFactor;
    break;
  case Kind::Normalize: {
    // Passes over the data: softmax max/exp/sum/div; a norm's mean, var,
    // normalize, scale, shift; a loss adds the gather of the target.
    double perElement = llvm::StringSwitch<double>(name)
                            .Cases({"Softmax", "LogSoftmax"}, 5)
                            .Case("LayerNormalization", 8)
                            .Case("BatchNormalization",
                                  getI64Attr(op, "training_mode", 0) ? 8 : 2)
                            .Case("SoftmaxCrossEntropyLoss", 6)
                            .Default(2);
    cost.flops = perElement * in;
    cost.backwardFactor = options.backwardFactor;
    break;
  }
  case Kind::Pool:
    if (name == "GlobalAveragePool")
      cost.flops = in;
    else if (name == "Resize")
      // Taps per output element: 1 (nearest), 2 per resized axis (linear),
      // 4 (cubic); counted for the up to three resized axes.
      cost.flops = out * llvm::StringSwitch<double>(
                             op->getAttrOfType<StringAttr>("mode")
                                 ? op->getAttrOfType<StringAttr>("mode").getValue()
                                 : "nearest")
                             .Case("linear", 2 * 8)
                             .Case("cubic", 2 * 64)
                             .Default(1);
    else if (std::optional<int64_t> volume = kernelVolume(op))
      cost.flops = out * double(*volume);
    else
      cost.known = false;
    cost.backwardFactor = options.backwardFactor;
    break;
  case Kind::Reduce:
    cost.flops = in;
    cost.backwardFactor = options.backwardFactor;
    break;
  case Kind::DataMovement:
    cost.flops = 0;
    cost.backwardFactor = options.backwardFactor;
    break;
  case Kind::Recurrent:
    if (std::optional<double> flops = recurrentFlops(op, name == "LSTM"))
      cost.flops = *flops;
    else
      cost.known = false;
    // The gradient reads the states its training form saved, then four
    // GEMMs of the forward's two sizes (dX, dW, dH_prev, dR): about 2x the
    // forward.
    cost.backwardFactor = 2.0;
    break;
  case Kind::Attention:
    if (std::optional<double> flops = attentionFlops(op))
      cost.flops = *flops;
    else
      cost.known = false;
    // The gradient: four products of the forward's two sizes (dP, dV, dQ,
    // dK) from the saved probabilities.
    cost.backwardFactor = 2.0;
    break;
  case Kind::Backward: {
    // Gradient ops are already the backward; nothing differentiates them.
    cost.backwardFactor = 0;
    if (name == "AttentionGrad") {
      if (std::optional<double> flops = attentionFlops(op))
        cost.flops = 2.0 * *flops;
      else
        cost.known = false;
      break;
    }
    if (name == "LSTMGrad" || name == "GRUGrad") {
      // 2x the forward, 3x without the forward's saved states (the last
      // operand; the kernel recomputes them).
      bool saved = !isa<NoneType>(op->getOperands().back().getType());
      if (std::optional<double> flops =
              recurrentFlops(op, name == "LSTMGrad"))
        cost.flops = (saved ? 2.0 : 3.0) * *flops;
      else
        cost.known = false;
      break;
    }
    if (name == "ConvGrad") {
      // dX and dW: each a convolution of the forward's size; dB a sum.
      // Operands: dY, X, W, ...
      auto w = staticShape(op->getOperand(2));
      double dy = numel(op->getOperand(0));
      if (!w || w->empty() || (*w)[0] == 0) {
        cost.known = false;
        break;
      }
      int64_t wElems = 1;
      for (int64_t d : *w)
        wElems *= d;
      cost.flops = 2 * (2.0 * dy * double(wElems / (*w)[0])) + dy;
      break;
    }
    double perElement = llvm::StringSwitch<double>(name)
                            .Cases({"SoftmaxGrad", "LogSoftmaxGrad"}, 4)
                            .Cases({"LayerNormalizationGrad",
                                    "BatchNormalizationGrad"},
                                   12)
                            .Case("SoftmaxCrossEntropyLossGrad", 3)
                            .Default(1);
    if (name == "MaxPoolGrad" || name == "AveragePoolGrad") {
      double dy = numel(name == "MaxPoolGrad" ? op->getOperand(1)
                                              : op->getOperand(0));
      cost.flops = dy * double(kernelVolume(op).value_or(1));
    } else {
      cost.flops = perElement * out;
    }
    break;
  }
  case Kind::Optimizer: {
    double perElement = llvm::StringSwitch<double>(name)
                            .Case("SGD", 3)
                            .Case("Momentum", 3)
                            .Case("Adagrad", 3)
                            .Default(4); // Adam(W): per result ~4 flops
    std::optional<int64_t> total = totalResultElements(op);
    if (!total)
      cost.known = false;
    cost.flops = perElement * double(total.value_or(0));
    cost.backwardFactor = 0;
    break;
  }
  case Kind::Unknown: {
    std::optional<int64_t> total = totalResultElements(op);
    cost.flops = double(total.value_or(0));
    cost.known = false;
    cost.backwardFactor = options.backwardFactor;
    break;
  }
  }

  // Integer and boolean results (shape computations, masks) carry no
  // gradient.
  bool anyFloat = false;
  for (Value result : op->getResults())
    if (auto shaped = dyn_cast<ShapedType>(result.getType()))
      anyFloat |= isa<FloatType>(shaped.getElementType());
  if (!anyFloat)
    cost.backwardFactor = 0;
  return cost;
}
