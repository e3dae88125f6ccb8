//===- ImportControlFlow.cpp - Loop and sequences, unrolled at import ------===//
//
// torch.onnx.export writes some tensor code with dynamic axes as an ONNX
// Loop over sequences: `repeat_interleave` (grouped-query attention's key
// and value heads) becomes SplitToSequence + a Loop whose body takes one
// part per iteration (SequenceAt), expands it and appends it
// (SequenceInsert), then ConcatFromSequence. Once the shapes are bound
// (--input-shape), the trip count and the condition fold to constants, so
// the importer unrolls the Loop: each iteration imports the body's nodes
// once more with the iteration number a constant. Sequences (SequenceEmpty,
// SequenceConstruct, SequenceInsert, SequenceErase, SequenceAt,
// SequenceLength, SplitToSequence, ConcatFromSequence) exist only
// while importing, as lists of tensor values: the program never holds one.
// A Loop whose trip count or condition depends on the data, or a sequence
// position that is not a constant, is an import error naming the node.
//
//===----------------------------------------------------------------------===//
#include "Importer.h"

#include "dialects/onnx/ShapeHelpers.h"

namespace mlir::pipec::onnx_import {

namespace {
/// The most iterations the unrolled Loops of a model may have together
/// (each copies its body; nested Loops multiply).
constexpr int64_t kMaxUnroll = 4096;

/// An integer attribute of `node`, or `fallback`.
int64_t intAttr(const pb::NodeProto &node, StringRef name, int64_t fallback) {
  for (const auto &a : node.attribute())
    if (a.name() == name)
      return a.i();
  return fallback;
}
} // namespace

bool Importer::isControlFlowOp(StringRef opType) {
  return llvm::is_contained({"Loop", "SequenceEmpty", "SequenceConstruct",
                             "SequenceInsert", "SequenceErase", "SequenceAt",
                             "SequenceLength",
                             "SplitToSequence", "ConcatFromSequence"},
                            opType);
}

FailureOr<SmallVector<Value>> Importer::sequenceInput(const pb::NodeProto &node,
                                                      int index, Location loc) {
  if (index >= node.input_size() || node.input(index).empty())
    return error(loc) << node.op_type() << " needs a sequence as input " << index;
  auto it = sequences.find(node.input(index));
  if (it == sequences.end())
    return error(loc) << "input '" << node.input(index)
                      << "' is not a sequence defined before this node";
  return it->second;
}

FailureOr<Value> Importer::tensorInput(const pb::NodeProto &node, int index,
                                       Location loc) {
  if (index >= node.input_size() || node.input(index).empty())
    return Value();
  auto it = values.find(node.input(index));
  if (it == values.end())
    return error(loc) << "input '" << node.input(index)
                      << "' is not a tensor defined before this node";
  return it->second;
}

/// A scalar (or one-element) integer constant, or an error naming `what`.
FailureOr<int64_t> Importer::constantIndex(Value v, StringRef what, Location loc) {
  std::optional<SmallVector<int64_t>> ints = v ? ox::getConstantInts(v) : std::nullopt;
  if (!ints || ints->size() != 1)
    return error(loc) << what
                      << " is not a constant: pipec unrolls loops and sequences at "
                         "import, so trip counts, conditions and positions must fold "
                         "to constants once the graph inputs' shapes are bound "
                         "(--input-shape)";
  return (*ints)[0];
}

LogicalResult Importer::importControlFlow(const pb::NodeProto &node, StringRef opType,
                                          Location loc) {
  // Each op built here gets a location of its own (pipe-split-stages
  // matches a gradient to its forward op by location).
  auto partLoc = [&](const Twine &what) -> Location {
    StringRef base = cast<NameLoc>(loc).getName().getValue();
    return NameLoc::get(builder.getStringAttr(base + " (" + what + ")"), fileLoc);
  };
  auto setOutput = [&](int i, Value v) {
    if (i < node.output_size() && !node.output(i).empty())
      values[node.output(i)] = v;
  };
  auto setSequence = [&](int i, SmallVector<Value> seq) {
    if (i < node.output_size() && !node.output(i).empty())
      sequences[node.output(i)] = std::move(seq);
  };
  auto position = [&](int64_t given, size_t size, bool insert) -> FailureOr<size_t> {
    int64_t n = static_cast<int64_t>(size), p = given < 0 ? given + n : given;
    if (p < 0 || p > n || (!insert && p == n))
      return error(loc) << "sequence position " << given << " is outside a sequence of "
                        << n;
    return static_cast<size_t>(p);
  };
  // A position input (a constant), or `fallback` where it is absent and
  // the operator has a default.
  auto positionOf = [&](Value given, std::optional<int64_t> fallback, size_t size,
                        bool insert) -> FailureOr<size_t> {
    int64_t p = fallback.value_or(0);
    if (given || !fallback) {
      auto c = constantIndex(given, "the sequence position", loc);
      if (failed(c))
        return failure();
      p = *c;
    }
    return position(p, size, insert);
  };

  if (opType == "SequenceEmpty") {
    setSequence(0, {});
    return success();
  }
  if (opType == "SequenceConstruct") {
    SmallVector<Value> seq;
    for (int i = 0; i < node.input_size(); ++i) {
      auto v = tensorInput(node, i, loc);
      if (failed(v))
        return failure();
      if (!*v)
        return error(loc) << "SequenceConstruct input " << i << " is absent";
      seq.push_back(*v);
    }
    setSequence(0, std::move(seq));
    return success();
  }
  if (opType == "SequenceLength") {
    auto seq = sequenceInput(node, 0, loc);
    if (failed(seq))
      return failure();
    auto type = RankedTensorType::get({}, builder.getI64Type());
    setOutput(0, ox::ConstantOp::create(
                     builder, loc, type,
                     DenseElementsAttr::get(type, static_cast<int64_t>(seq->size()))));
    return success();
  }
  if (opType == "SequenceAt" || opType == "SequenceInsert") {
    auto seq = sequenceInput(node, 0, loc);
    if (failed(seq))
      return failure();
    bool insert = opType == "SequenceInsert";
    auto tensor = insert ? tensorInput(node, 1, loc) : FailureOr<Value>(Value());
    auto posValue = tensorInput(node, insert ? 2 : 1, loc);
    if (failed(tensor) || failed(posValue))
      return failure();
    if (insert && !*tensor)
      return error(loc) << "SequenceInsert needs a tensor to insert";
    // SequenceAt needs a position; SequenceInsert appends without one.
    auto at = positionOf(*posValue, insert ? std::optional<int64_t>(seq->size()) : std::nullopt,
                         seq->size(), insert);
    if (failed(at))
      return failure();
    if (!insert) {
      setOutput(0, (*seq)[*at]);
      return success();
    }
    SmallVector<Value> out = *seq;
    out.insert(out.begin() + *at, *tensor);
    setSequence(0, std::move(out));
    return success();
  }
  if (opType == "SequenceErase") {
    auto seq = sequenceInput(node, 0, loc);
    auto posValue = tensorInput(node, 1, loc);
    if (failed(seq) || failed(posValue))
      return failure();
    // Without a position, the last.
    auto at = positionOf(*posValue, static_cast<int64_t>(seq->size()) - 1, seq->size(),
                         /*insert=*/false);
    if (failed(at))
      return failure();
    SmallVector<Value> out = *seq;
    out.erase(out.begin() + *at);
    setSequence(0, std::move(out));
    return success();
  }
  if (opType == "SplitToSequence") {
    auto input = tensorInput(node, 0, loc);
    auto split = tensorInput(node, 1, loc);
    if (failed(input) || failed(split))
      return failure();
    auto type = *input ? dyn_cast<RankedTensorType>(input->getType()) : RankedTensorType();
    if (!type || type.getRank() == 0)
      return error(loc) << "SplitToSequence needs a ranked input of rank >= 1";
    int64_t axis = intAttr(node, "axis", 0), rank = type.getRank();
    if (axis < -rank || axis >= rank)
      return error(loc) << "SplitToSequence axis " << axis << " is outside rank " << rank;
    if (axis < 0)
      axis += rank;
    int64_t dim = type.getDimSize(axis);
    if (ShapedType::isDynamic(dim))
      return error(loc) << "SplitToSequence splits a dynamic axis (bind the graph "
                           "inputs' shapes with --input-shape)";
    SmallVector<int64_t> sizes;
    bool squeeze = false;
    if (!*split) {
      sizes.assign(dim, 1);
      squeeze = intAttr(node, "keepdims", 1) == 0;
    } else {
      std::optional<SmallVector<int64_t>> s = ox::getConstantInts(*split);
      auto splitType = cast<RankedTensorType>(split->getType());
      if (!s)
        return error(loc) << "SplitToSequence's split is not a constant";
      if (splitType.getRank() == 0) {
        if ((*s)[0] <= 0)
          return error(loc) << "SplitToSequence's split must be positive";
        for (int64_t left = dim; left > 0; left -= (*s)[0])
          sizes.push_back(std::min(left, (*s)[0]));
      } else {
        sizes = *s;
      }
    }
    int64_t total = 0;
    for (int64_t s : sizes) {
      if (s < 0)
        return error(loc) << "SplitToSequence's split sizes must be non-negative";
      total += s;
    }
    if (total != dim)
      return error(loc) << "SplitToSequence's parts sum to " << total << ", not the axis' "
                        << dim;
    SmallVector<Value> seq;
    if (sizes.empty()) {
      // A zero-length axis: the empty sequence.
    } else if (sizes.size() == 1) {
      seq.push_back(*input);
    } else {
      NamedAttrList attrs;
      attrs.set("axis", builder.getI64IntegerAttr(axis));
      auto parts = typeAndFold(createOp("Split", {*input, constantI64(sizes, loc)},
                                        attrs.getAttrs(), sizes.size(), loc));
      if (failed(parts))
        return failure();
      seq.assign(parts->begin(), parts->end());
    }
    if (squeeze)
      for (auto [k, v] : llvm::enumerate(seq)) {
        Location at = partLoc("part " + Twine(k));
        auto r = createOne("Squeeze", {v, constantI64({axis}, at)}, {}, at);
        if (failed(r))
          return failure();
        v = *r;
      }
    setSequence(0, std::move(seq));
    return success();
  }
  if (opType == "ConcatFromSequence") {
    auto seq = sequenceInput(node, 0, loc);
    if (failed(seq))
      return failure();
    if (seq->empty())
      return error(loc) << "ConcatFromSequence of an empty sequence";
    int64_t axis = intAttr(node, "axis", 0);
    SmallVector<Value> parts = *seq;
    bool newAxis = intAttr(node, "new_axis", 0) == 1;
    auto firstType = dyn_cast<RankedTensorType>(parts[0].getType());
    if (!firstType)
      return error(loc) << "ConcatFromSequence needs ranked tensors";
    int64_t rank = firstType.getRank() + (newAxis ? 1 : 0);
    if (axis < -rank || axis >= rank)
      return error(loc) << "ConcatFromSequence axis " << axis << " is outside [" << -rank
                        << ", " << rank - 1 << "]";
    if (axis < 0)
      axis += rank;
    if (newAxis) {
      for (auto [k, v] : llvm::enumerate(parts)) {
        Location at = partLoc("part " + Twine(k));
        auto r = createOne("Unsqueeze", {v, constantI64({axis}, at)}, {}, at);
        if (failed(r))
          return failure();
        v = *r;
      }
    }
    if (parts.size() == 1) {
      setOutput(0, parts[0]);
      return success();
    }
    auto r = createOne("Concat", parts, {builder.getNamedAttr("axis", builder.getI64IntegerAttr(axis))},
                       loc);
    if (failed(r))
      return failure();
    setOutput(0, *r);
    return success();
  }

  // Loop(M, cond, v_initial...): body(iteration, cond, v...) -> (cond, v...,
  // scan...). Unrolled while the condition is a true constant.
  assert(opType == "Loop");
  const pb::GraphProto *body = nullptr;
  for (const auto &a : node.attribute())
    if (a.name() == "body" && a.has_g())
      body = &a.g();
  if (!body)
    return error(loc) << "Loop has no body graph";
  auto tripValue = tensorInput(node, 0, loc);
  auto condValue = tensorInput(node, 1, loc);
  if (failed(tripValue) || failed(condValue))
    return failure();
  int64_t trips = kMaxUnroll + 1;
  if (*tripValue) {
    auto m = constantIndex(*tripValue, "the Loop's trip count", loc);
    if (failed(m))
      return failure();
    trips = *m;
  }
  bool cond = true;
  if (*condValue) {
    auto c = constantIndex(*condValue, "the Loop's condition", loc);
    if (failed(c))
      return failure();
    cond = *c != 0;
  }
  const int carried = node.input_size() - 2;
  if (carried < 0 || body->input_size() != carried + 2 ||
      body->output_size() < carried + 1)
    return error(loc) << "Loop's body must take the iteration number, the condition "
                         "and the "
                      << std::max(carried, 0)
                      << " loop-carried values, and return the condition and them";
  const int scans = body->output_size() - 1 - carried;
  // The loop-carried state: a tensor or a sequence each.
  struct Item {
    Value tensor;
    SmallVector<Value> seq;
    bool isSeq = false;
  };
  SmallVector<Item> state(carried);
  for (int k = 0; k < carried; ++k) {
    const std::string &name = node.input(2 + k);
    if (auto s = sequences.find(name); s != sequences.end()) {
      state[k].isSeq = true;
      state[k].seq = s->second;
    } else if (auto v = values.find(name); v != values.end()) {
      state[k].tensor = v->second;
    } else {
      return error(loc) << "Loop input '" << name << "' is not defined before this node";
    }
  }
  SmallVector<SmallVector<Value>> scanned(scans);
  // The body's own names: each iteration defines them anew (and they are
  // not visible after the Loop).
  SmallVector<std::string> bodyNames;
  for (const auto &in : body->input())
    bodyNames.push_back(in.name());
  for (const auto &n : body->node())
    for (const auto &o : n.output())
      if (!o.empty())
        bodyNames.push_back(o);
  for (const auto &t : body->initializer())
    bodyNames.push_back(t.name());
  auto forgetBody = [&] {
    for (const std::string &name : bodyNames) {
      values.erase(name);
      sequences.erase(name);
    }
  };
  // A body name may shadow an outer one (nested Loops naming their
  // iteration alike): the outer values come back after the Loop.
  llvm::StringMap<Value> outerValues;
  llvm::StringMap<SmallVector<Value>> outerSequences;
  for (const std::string &name : bodyNames) {
    if (auto v = values.find(name); v != values.end())
      outerValues[name] = v->second;
    if (auto q = sequences.find(name); q != sequences.end())
      outerSequences[name] = q->second;
  }
  auto restoreOuter = [&] {
    forgetBody();
    for (auto &entry : outerValues)
      values[entry.getKey()] = entry.getValue();
    for (auto &entry : outerSequences)
      sequences[entry.getKey()] = entry.getValue();
  };
  int64_t i = 0;
  for (; cond && i < trips; ++i) {
    if (i >= kMaxUnroll || ++unrolledIterations > kMaxUnroll)
      return error(loc) << "Loop runs more than " << kMaxUnroll
                        << " iterations (or until a condition pipec cannot fold); pipec "
                           "unrolls loops at import";
    forgetBody();
    auto i64 = RankedTensorType::get({}, builder.getI64Type());
    auto i1 = RankedTensorType::get({}, builder.getI1Type());
    values[body->input(0).name()] =
        ox::ConstantOp::create(builder, loc, i64, DenseElementsAttr::get(i64, i));
    values[body->input(1).name()] =
        ox::ConstantOp::create(builder, loc, i1, DenseElementsAttr::get(i1, true));
    for (const auto &t : body->initializer()) {
      auto value = tensorAttr(t, loc, /*allowResource=*/true);
      if (failed(value)) {
        restoreOuter();
        return failure();
      }
      values[t.name()] = ox::ConstantOp::create(
          builder, loc, cast<ShapedType>(value->getType()), *value);
    }
    for (int k = 0; k < carried; ++k) {
      const std::string &name = body->input(2 + k).name();
      if (state[k].isSeq)
        sequences[name] = state[k].seq;
      else
        values[name] = state[k].tensor;
    }
    std::string outerScope = labelScope;
    labelScope = (cast<NameLoc>(loc).getName().getValue() + " iteration " + Twine(i) + ": ").str();
    for (int n = 0; n < body->node_size(); ++n)
      if (failed(importNode(body->node(n), n))) {
        labelScope = outerScope;
        return failure();
      }
    labelScope = outerScope;
    auto out = [&](int o) -> FailureOr<Item> {
      const std::string &name = body->output(o).name();
      Item item;
      if (auto s = sequences.find(name); s != sequences.end()) {
        item.isSeq = true;
        item.seq = s->second;
      } else if (auto v = values.find(name); v != values.end()) {
        item.tensor = v->second;
      } else {
        return error(loc) << "Loop body output '" << name << "' is not produced";
      }
      return item;
    };
    auto condOut = out(0);
    if (failed(condOut))
      return failure();
    if (condOut->isSeq)
      return error(loc) << "Loop body's condition is a sequence";
    auto c = constantIndex(condOut->tensor, "the Loop body's condition", loc);
    if (failed(c))
      return failure();
    cond = *c != 0;
    for (int k = 0; k < carried; ++k) {
      auto item = out(1 + k);
      if (failed(item))
        return failure();
      state[k] = *item;
    }
    for (int s = 0; s < scans; ++s) {
      auto item = out(1 + carried + s);
      if (failed(item))
        return failure();
      if (item->isSeq)
        return error(loc) << "Loop scan outputs must be tensors";
      scanned[s].push_back(item->tensor);
    }
  }
  restoreOuter();
  for (int k = 0; k < carried; ++k) {
    if (state[k].isSeq)
      setSequence(k, state[k].seq);
    else
      setOutput(k, state[k].tensor);
  }
  for (int s = 0; s < scans; ++s) {
    if (scanned[s].empty())
      return error(loc) << "Loop ran no iteration, so its scan output " << s
                        << " has no shape";
    SmallVector<Value> parts;
    for (auto [k, v] : llvm::enumerate(scanned[s])) {
      Location at = partLoc("scan output " + Twine(s) + ", iteration " + Twine(k));
      auto r = createOne("Unsqueeze", {v, constantI64({0}, at)}, {}, at);
      if (failed(r))
        return failure();
      parts.push_back(*r);
    }
    Value stacked = parts[0];
    if (parts.size() > 1) {
      auto r = createOne("Concat", parts,
                         {builder.getNamedAttr("axis", builder.getI64IntegerAttr(0))}, loc);
      if (failed(r))
        return failure();
      stacked = *r;
    }
    setOutput(carried + s, stacked);
  }
  return success();
}

} // namespace mlir::pipec::onnx_import
