//===- onnx_export.cpp - trained weights back into the ONNX model ----------===//
#include "pipert/pipert_checkpoint.h"
#include "checkpoint_io.h"

#include <onnx/onnx_pb.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

std::string readAll(const std::string &path, const char *what) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    pipert_fail("%s: cannot open '%s': %s", what, path.c_str(), std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string dimsString(const onnx::TensorProto &t) {
  std::string s = "[";
  for (int i = 0; i < t.dims_size(); ++i)
    s += (i ? "," : "") + std::to_string(t.dims(i));
  return s + "]";
}

std::string dimsString(const int64_t *shape, int ndim) {
  std::string s = "[";
  for (int i = 0; i < ndim; ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

void clearData(onnx::TensorProto &t) {
  t.clear_float_data();
  t.clear_int32_data();
  t.clear_string_data();
  t.clear_int64_data();
  t.clear_double_data();
  t.clear_uint64_data();
  t.clear_external_data();
  t.set_data_location(onnx::TensorProto::DEFAULT);
}

uint64_t byteSize(const onnx::TensorProto &t) {
  uint64_t n = pipert_dtype_size(static_cast<pipert_dtype>(t.data_type()));
  for (int i = 0; i < t.dims_size(); ++i)
    n *= static_cast<uint64_t>(t.dims(i));
  return n;
}

// Reads an external-data initializer from its file (next to the model) and
// stores it inline.
void inlineExternal(onnx::TensorProto &t, const std::string &modelDir, const char *what) {
  std::string location;
  uint64_t offset = 0;
  int64_t length = -1;
  for (const auto &kv : t.external_data()) {
    if (kv.key() == "location")
      location = kv.value();
    else if (kv.key() == "offset")
      offset = std::stoull(kv.value());
    else if (kv.key() == "length")
      length = std::stoll(kv.value());
  }
  if (location.empty())
    pipert_fail("%s: initializer '%s' has external data without a location", what,
                t.name().c_str());
  const std::string file = location[0] == '/' ? location : modelDir + "/" + location;
  std::ifstream in(file, std::ios::binary);
  if (!in)
    pipert_fail("%s: cannot open external data '%s' of initializer '%s': %s", what, file.c_str(),
                t.name().c_str(), std::strerror(errno));
  const uint64_t want = length >= 0 ? static_cast<uint64_t>(length) : byteSize(t);
  std::string data(want, '\0');
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(data.data(), static_cast<std::streamsize>(want));
  if (!in || static_cast<uint64_t>(in.gcount()) != want)
    pipert_fail("%s: external data '%s' of initializer '%s' is shorter than %llu bytes at "
                "offset %llu",
                what, file.c_str(), t.name().c_str(), static_cast<unsigned long long>(want),
                static_cast<unsigned long long>(offset));
  clearData(t);
  t.set_raw_data(std::move(data));
}

} // namespace

extern "C" void pipert_export_onnx(pipert_context *ctx, const char *model_in,
                                   const char *model_out, const pipert_named_tensor *tensors,
                                   int n) {
  const char *what = "ONNX export";
  GOOGLE_PROTOBUF_VERIFY_VERSION;
  const std::string bytes = readAll(model_in, what);
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes))
    pipert_fail("%s: '%s' is not a valid ONNX model", what, model_in);
  onnx::GraphProto *graph = model.mutable_graph();
  std::unordered_map<std::string, onnx::TensorProto *> byName;
  for (auto &init : *graph->mutable_initializer())
    byName[init.name()] = &init;

  for (int i = 0; i < n; ++i) {
    const pipert_named_tensor &t = tensors[i];
    auto it = byName.find(t.name);
    if (it == byName.end())
      pipert_fail("%s: '%s' has no initializer named '%s'", what, model_in, t.name);
    onnx::TensorProto &init = *it->second;
    if (init.data_type() != static_cast<int>(t.dtype))
      pipert_fail("%s: initializer '%s' has ONNX data type %d, the tensor is %s", what, t.name,
                  init.data_type(), pipert_dtype_name(t.dtype));
    bool same = init.dims_size() == t.ndim;
    for (int d = 0; same && d < t.ndim; ++d)
      same = init.dims(d) == t.shape[d];
    if (!same)
      pipert_fail("%s: initializer '%s' has shape %s, the tensor has %s", what, t.name,
                  dimsString(init).c_str(), dimsString(t.shape, t.ndim).c_str());
    std::string data(byteSize(init), '\0');
    if (!data.empty())
      pipert_copy_to_host(ctx, data.data(), t.data, data.size());
    clearData(init);
    init.set_raw_data(std::move(data));
  }

  std::string modelDir = model_in;
  const size_t slash = modelDir.rfind('/');
  modelDir = slash == std::string::npos ? "." : modelDir.substr(0, slash ? slash : 1);
  for (auto &init : *graph->mutable_initializer())
    if (init.data_location() == onnx::TensorProto::EXTERNAL)
      inlineExternal(init, modelDir, what);

  std::string out;
  if (!model.SerializeToString(&out))
    pipert_fail("%s: cannot serialise the model (over 2 GiB inline?)", what);
  pipert_detail::AtomicFile file(model_out, what);
  file.write(out.data(), out.size());
  file.commit();
}
