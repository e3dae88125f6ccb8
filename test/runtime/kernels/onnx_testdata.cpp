//===- onnx_testdata.cpp - reading ONNX backend node tests ----------------===//
#include "onnx_testdata.h"

#include <algorithm>
#include <cmath>
#include <dirent.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

namespace pipert_test {

using TP = onnx::TensorProto;

size_t dtype_size(int t) {
  switch (t) {
  case TP::FLOAT: case TP::INT32: case TP::UINT32: return 4;
  case TP::DOUBLE: case TP::INT64: case TP::UINT64: return 8;
  case TP::UINT8: case TP::INT8: case TP::BOOL: return 1;
  case TP::FLOAT16: case TP::BFLOAT16: case TP::INT16: case TP::UINT16: return 2;
  default: return 0;
  }
}

Tensor make_tensor(int dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.bytes.assign(size_t(std::max<int64_t>(t.numel(), 0)) * dtype_size(dtype), 0);
  return t;
}

double Tensor::scalar() const {
  switch (dtype) {
  case TP::FLOAT: return data<float>()[0];
  case TP::DOUBLE: return data<double>()[0];
  case TP::INT64: return double(data<int64_t>()[0]);
  case TP::INT32: return data<int32_t>()[0];
  case TP::BOOL: case TP::UINT8: return data<uint8_t>()[0];
  default: return NAN;
  }
}

std::vector<int64_t> Tensor::as_i64() const {
  std::vector<int64_t> v(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i)
    v[size_t(i)] = dtype == TP::INT32 ? data<int32_t>()[i] : data<int64_t>()[i];
  return v;
}

Tensor from_proto(const TP &p) {
  Tensor t = make_tensor(p.data_type(), {p.dims().begin(), p.dims().end()});
  const size_t n = size_t(t.numel());
  if (p.has_raw_data() && !p.raw_data().empty()) {
    std::memcpy(t.bytes.data(), p.raw_data().data(), std::min(t.bytes.size(), p.raw_data().size()));
    return t;
  }
  auto fill32 = [&](auto *dst) {
    for (size_t i = 0; i < n && int(i) < p.int32_data_size(); ++i)
      dst[i] = static_cast<std::remove_pointer_t<decltype(dst)>>(p.int32_data(int(i)));
  };
  switch (p.data_type()) {
  case TP::FLOAT:
    for (size_t i = 0; i < n && int(i) < p.float_data_size(); ++i)
      t.data<float>()[i] = p.float_data(int(i));
    break;
  case TP::DOUBLE:
    for (size_t i = 0; i < n && int(i) < p.double_data_size(); ++i)
      t.data<double>()[i] = p.double_data(int(i));
    break;
  case TP::INT64:
    for (size_t i = 0; i < n && int(i) < p.int64_data_size(); ++i)
      t.data<int64_t>()[i] = p.int64_data(int(i));
    break;
  case TP::INT32: fill32(t.data<int32_t>()); break;
  case TP::UINT8: case TP::BOOL: fill32(t.data<uint8_t>()); break;
  case TP::INT8: fill32(t.data<int8_t>()); break;
  case TP::FLOAT16: case TP::BFLOAT16: case TP::INT16: case TP::UINT16:
    fill32(t.data<uint16_t>());
    break;
  default: break;
  }
  return t;
}

bool read_tensor_file(const std::string &path, Tensor &out) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return false;
  std::stringstream ss;
  ss << f.rdbuf();
  TP p;
  if (!p.ParseFromString(ss.str()))
    return false;
  out = from_proto(p);
  return true;
}

static std::vector<std::string> list_dir(const std::string &dir, const std::string &prefix) {
  std::vector<std::string> names;
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d)) {
      std::string s = e->d_name;
      if (s.rfind(prefix, 0) == 0)
        names.push_back(s);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> list_cases() { return list_dir(PIPERT_ONNX_NODE_TESTS, "test_"); }

bool load_case(const std::string &name, NodeCase &c, std::string &why) {
  c.name = name;
  c.dir = std::string(PIPERT_ONNX_NODE_TESTS) + "/" + name;
  {
    std::ifstream f(c.dir + "/model.onnx", std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    if (!f || !c.model.ParseFromString(ss.str())) {
      why = "cannot parse model.onnx";
      return false;
    }
  }
  const auto &g = c.model.graph();
  if (g.node_size() != 1) {
    why = "not a single node";
    return false;
  }
  const std::string &domain = g.node(0).domain();
  for (const auto &o : c.model.opset_import())
    if (o.domain() == domain || (domain == "ai.onnx" && o.domain().empty()))
      c.opset = o.version();
  for (const auto &in : g.input())
    if (!in.type().has_tensor_type()) {
      why = "input '" + in.name() + "' is not a tensor";
      return false;
    }
  for (const auto &out : g.output())
    if (!out.type().has_tensor_type()) {
      why = "output '" + out.name() + "' is not a tensor";
      return false;
    }
  for (const std::string &set : list_dir(c.dir, "test_data_set_")) {
    NodeCase::DataSet ds;
    const std::string sd = c.dir + "/" + set + "/";
    for (int i = 0; i < g.input_size(); ++i) {
      Tensor t;
      if (!read_tensor_file(sd + "input_" + std::to_string(i) + ".pb", t)) {
        why = "cannot read " + set + "/input_" + std::to_string(i) + ".pb";
        return false;
      }
      ds.inputs[g.input(i).name()] = std::move(t);
    }
    for (int i = 0; i < g.output_size(); ++i) {
      Tensor t;
      if (!read_tensor_file(sd + "output_" + std::to_string(i) + ".pb", t)) {
        why = "cannot read " + set + "/output_" + std::to_string(i) + ".pb";
        return false;
      }
      ds.outputs.push_back(std::move(t));
    }
    c.sets.push_back(std::move(ds));
  }
  if (c.sets.empty()) {
    why = "no test data sets";
    return false;
  }
  return true;
}

static double element(const Tensor &t, int64_t i) {
  switch (t.dtype) {
  case TP::FLOAT: return t.data<float>()[i];
  case TP::DOUBLE: return t.data<double>()[i];
  case TP::INT64: return double(t.data<int64_t>()[i]);
  case TP::INT32: return t.data<int32_t>()[i];
  case TP::INT8: return t.data<int8_t>()[i];
  case TP::UINT8: case TP::BOOL: return t.data<uint8_t>()[i];
  default: return NAN;
  }
}

std::string compare(const Tensor &a, const Tensor &e, double rtol, double atol) {
  std::ostringstream os;
  if (a.dtype != e.dtype) {
    os << "dtype " << a.dtype << " vs expected " << e.dtype;
    return os.str();
  }
  if (a.shape != e.shape) {
    os << "shape (";
    for (auto d : a.shape)
      os << d << ",";
    os << ") vs expected (";
    for (auto d : e.shape)
      os << d << ",";
    os << ")";
    return os.str();
  }
  const bool exact = a.dtype != TP::FLOAT && a.dtype != TP::DOUBLE;
  for (int64_t i = 0; i < e.numel(); ++i) {
    const double x = element(a, i), y = element(e, i);
    if (std::isnan(y) ? std::isnan(x) : (exact ? x == y : std::fabs(x - y) <= atol + rtol * std::fabs(y)))
      continue;
    os << "element " << i << ": " << x << " vs expected " << y;
    return os.str();
  }
  return "";
}

} // namespace pipert_test
