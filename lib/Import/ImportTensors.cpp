//===- ImportTensors.cpp - ONNX types and tensors → MLIR ------------------===//
//
// Element and tensor types of value infos, and tensors (initializers,
// Constant values, tensor attributes) as elements attributes: inline,
// as dialect resources, or read from external data files.
//
//===----------------------------------------------------------------------===//
#include "Importer.h"

#include "dialects/onnx/ShapeHelpers.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include <algorithm>
#include <cstring>

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace mlir;

namespace mlir::pipec::onnx_import {

//===----------------------------------------------------------------------===//
// Types and tensors
//===----------------------------------------------------------------------===//

FailureOr<Type> Importer::elementType(int32_t t, Location loc) {
  // Complex and 8-bit float types exist in the dialect's mapping but have no
  // kernels; strings have no MLIR element type at all.
  Type type = ox::onnxDataTypeToType(ctx, t);
  if (type && (type.isIntOrIndex() || type.isF16() || type.isBF16() ||
               type.isF32() || type.isF64()))
    return type;
  std::string name = pb::TensorProto::DataType_IsValid(t)
                         ? pb::TensorProto::DataType_Name(t)
                         : std::to_string(t);
  return error(loc) << "element type " << name
                    << " is not supported (use float, double, float16, "
                       "bfloat16, (u)int8/16/32/64 or bool)";
}

FailureOr<RankedTensorType>
Importer::valueType(const pb::ValueInfoProto &info, Location loc) {
  const std::string &name = info.name();
  if (!info.has_type() || !info.type().has_tensor_type())
    return error(loc) << "graph input '" << name
                      << "' is not a tensor (sequences, maps and optionals "
                         "are not supported)";
  const auto &tt = info.type().tensor_type();
  auto elt = elementType(tt.elem_type(), loc);
  if (failed(elt))
    return failure();
  auto bound = opts.inputShapes.find(name);
  if (bound != opts.inputShapes.end())
    return RankedTensorType::get(bound->second, *elt);
  if (!tt.has_shape())
    return error(loc) << "graph input '" << name
                      << "' has no shape; give it one with --input-shape "
                      << name << "=DxDx...";
  SmallVector<int64_t> shape;
  for (int i = 0; i < tt.shape().dim_size(); ++i) {
    const auto &dim = tt.shape().dim(i);
    if (dim.has_dim_value() && dim.dim_value() >= 0) {
      shape.push_back(dim.dim_value());
      continue;
    }
    if (dim.has_dim_value())
      return error(loc) << "graph input '" << name << "' dimension " << i << " is "
                        << dim.dim_value() << " (negative); fix the model, or bind the input with "
                        << "--input-shape " << name << "=DxDx...";
    std::string symbol = dim.has_dim_param() ? dim.dim_param() : "";
    auto sym = symbol.empty() ? opts.inputShapes.end()
                              : opts.inputShapes.find(symbol);
    if (sym != opts.inputShapes.end() && sym->second.size() == 1) {
      shape.push_back(sym->second[0]);
      continue;
    }
    auto diag = error(loc) << "graph input '" << name << "' dimension " << i
                           << " is symbolic";
    if (!symbol.empty())
      diag << " ('" << symbol << "')";
    diag << "; bind it with --input-shape " << name << "=DxDx..."
         << (symbol.empty() ? "" : " or --input-shape " + symbol + "=<size>")
         << (symbol == "batch" ? " (pipe-compile: --batch <size>)" : "");
    return failure();
  }
  return RankedTensorType::get(shape, *elt);
}

FailureOr<std::string> Importer::externalData(const pb::TensorProto &t,
                                              Location loc) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto &kv : t.external_data()) {
    if (kv.key() == "location")
      location = kv.value();
    else if (kv.key() == "offset")
      offset = std::atoll(kv.value().c_str());
    else if (kv.key() == "length")
      length = std::atoll(kv.value().c_str());
  }
  if (location.empty())
    return error(loc) << "initializer '" << t.name()
                      << "' has external data without a location";
  SmallString<256> file(llvm::sys::path::parent_path(path));
  llvm::sys::path::append(file, location);
  auto buffer = llvm::MemoryBuffer::getFile(file, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return error(loc) << "initializer '" << t.name()
                      << "': cannot read external data file '" << file
                      << "': " << buffer.getError().message();
  StringRef data = (*buffer)->getBuffer();
  if (offset < 0 || offset > (int64_t)data.size() ||
      (length >= 0 && offset + length > (int64_t)data.size()))
    return error(loc) << "initializer '" << t.name() << "': external data "
                      << "range [" << offset << ", +" << length
                      << ") lies outside '" << file << "' ("
                      << data.size() << " bytes)";
  return data.substr(offset, length < 0 ? StringRef::npos : length).str();
}

FailureOr<ElementsAttr> Importer::tensorAttr(const pb::TensorProto &t,
                                             Location loc,
                                             bool allowResource, bool splatUniform) {
  auto elt = elementType(t.data_type(), loc);
  if (failed(elt))
    return failure();
  SmallVector<int64_t> shape(t.dims().begin(), t.dims().end());
  int64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return error(loc) << "tensor '" << t.name() << "' has negative dimension "
                        << d;
    count *= d;
  }
  auto type = RankedTensorType::get(shape, *elt);
  unsigned width = elt->isInteger(1) ? 8 : elt->getIntOrFloatBitWidth();
  size_t bytes = (size_t)count * width / 8;

  // Gather the little-endian bytes of the tensor, whichever field holds them.
  std::string raw;
  if (t.data_location() == pb::TensorProto::EXTERNAL) {
    auto data = externalData(t, loc);
    if (failed(data))
      return failure();
    raw = std::move(*data);
  } else if (t.has_raw_data()) {
    raw = t.raw_data();
  } else {
    raw.resize(bytes);
    auto put = [&](auto value, int64_t i) {
      using T = decltype(value);
      std::memcpy(raw.data() + i * sizeof(T), &value, sizeof(T));
    };
    int64_t n = 0;
    switch (t.data_type()) {
    case pb::TensorProto::FLOAT:
      n = t.float_data_size();
      for (int64_t i = 0; i < std::min(n, count); ++i) put(t.float_data(i), i);
      break;
    case pb::TensorProto::DOUBLE:
      n = t.double_data_size();
      for (int64_t i = 0; i < std::min(n, count); ++i) put(t.double_data(i), i);
      break;
    case pb::TensorProto::INT64:
      n = t.int64_data_size();
      for (int64_t i = 0; i < std::min(n, count); ++i) put(t.int64_data(i), i);
      break;
    case pb::TensorProto::UINT32: case pb::TensorProto::UINT64:
      n = t.uint64_data_size();
      for (int64_t i = 0; i < std::min(n, count); ++i) {
        if (width == 64) put((uint64_t)t.uint64_data(i), i);
        else put((uint32_t)t.uint64_data(i), i);
      }
      break;
    default: // int32, int16, int8, uint8, uint16, bool, float16, bfloat16
      n = t.int32_data_size();
      for (int64_t i = 0; i < std::min(n, count); ++i) {
        int32_t v = t.int32_data(i);
        switch (width) {
        case 32: put((int32_t)v, i); break;
        case 16: put((uint16_t)v, i); break;
        default: put((uint8_t)v, i); break;
        }
      }
      break;
    }
    if (n != count)
      return error(loc) << "tensor '" << t.name() << "' holds " << n
                        << " values but its shape needs " << count;
  }
  if (raw.size() != bytes)
    return error(loc) << "tensor '" << t.name() << "' holds " << raw.size()
                      << " bytes but its shape and type need " << bytes;

  // A fill (every element's bytes equal) as a splat.
  if (splatUniform && bytes > 0 && !elt->isInteger(1)) {
    const size_t es = bytes / size_t(std::max<int64_t>(type.getNumElements(), 1));
    bool uniform = es > 0 && bytes % es == 0;
    for (size_t at = es; uniform && at < bytes; at += es)
      uniform = std::memcmp(raw.data(), raw.data() + at, es) == 0;
    if (uniform && type.getNumElements() > 1)
      return ElementsAttr(
          DenseElementsAttr::getFromRawBuffer(type, ArrayRef<char>(raw.data(), es)));
  }
  if (allowResource && (int64_t)bytes >= opts.resourceThresholdBytes &&
      !elt->isInteger(1)) {
    std::string blob = t.name().empty() ? "tensor" : t.name();
    for (char &c : blob)
      if (!llvm::isAlnum(c) && c != '_' && c != '.')
        c = '_';
    std::string unique = blob;
    for (int i = 1; blobNames.count(unique); ++i)
      unique = blob + "_" + std::to_string(i);
    blobNames.insert(unique);
    auto data = HeapAsmResourceBlob::allocateAndCopyWithAlign(
        ArrayRef<char>(raw.data(), raw.size()), alignof(double));
    return ElementsAttr(DenseResourceElementsAttr::get(type, unique,
                                                       std::move(data)));
  }
  if (elt->isInteger(1)) {
    SmallVector<bool> bits;
    for (char c : raw)
      bits.push_back(c != 0);
    return ElementsAttr(DenseElementsAttr::get(type, ArrayRef<bool>(bits)));
  }
  return ElementsAttr(DenseElementsAttr::getFromRawBuffer(
      type, ArrayRef<char>(raw.data(), raw.size())));
}

} // namespace mlir::pipec::onnx_import
