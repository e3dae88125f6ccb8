//===- onnx_testdata.h - reading ONNX backend node tests ---------*- C++ -*-===//
//
// Loads /usr/share/libonnx-testdata/data/node/<case>/ (model.onnx plus
// test_data_set_*/input_*.pb and output_*.pb) into plain host tensors, and
// compares results with ONNX's tolerance rule |a - e| <= atol + rtol * |e|.
//
//===----------------------------------------------------------------------===//
#ifndef PIPERT_TEST_KERNELS_ONNX_TESTDATA_H
#define PIPERT_TEST_KERNELS_ONNX_TESTDATA_H

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pipert_test {

#ifndef PIPERT_ONNX_NODE_TESTS
#define PIPERT_ONNX_NODE_TESTS "/usr/share/libonnx-testdata/data/node"
#endif

struct Tensor {
  int dtype = 0; // onnx::TensorProto::DataType
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  int64_t rank() const { return int64_t(shape.size()); }
  template <typename T> T *data() { return reinterpret_cast<T *>(bytes.data()); }
  template <typename T> const T *data() const { return reinterpret_cast<const T *>(bytes.data()); }
  // Scalar or 1-element tensor as a double/int64 value.
  double scalar() const;
  std::vector<int64_t> as_i64() const; // for int64/int32 shape-like inputs
};

size_t dtype_size(int dtype);
Tensor make_tensor(int dtype, std::vector<int64_t> shape);
Tensor from_proto(const onnx::TensorProto &p);
bool read_tensor_file(const std::string &path, Tensor &out);

struct NodeCase {
  std::string name, dir;
  onnx::ModelProto model;
  int64_t opset = 0; // of the node's domain
  // Per data set: inputs by graph-input name, outputs in graph-output order.
  struct DataSet {
    std::map<std::string, Tensor> inputs;
    std::vector<Tensor> outputs;
  };
  std::vector<DataSet> sets;
};

// Every case directory under the node test root, sorted.
std::vector<std::string> list_cases();
// Loads model and data; false with `why` if something is not a plain tensor.
bool load_case(const std::string &name, NodeCase &c, std::string &why);

// Empty when `actual` matches `expected` (shape, dtype, values within
// tolerance; NaN matches NaN); otherwise a description of the first mismatch.
std::string compare(const Tensor &actual, const Tensor &expected, double rtol, double atol);

} // namespace pipert_test

#endif
