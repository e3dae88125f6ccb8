"""Writes the data files the pipert I/O tests read: .npz archives (np.savez and
np.savez_compressed, every supported dtype, and broken ones) and ONNX models.

usage: gen_fixtures.py OUTDIR
The values are formulas that npz_test.cpp recomputes.
"""
import io
import os
import warnings
import sys
import zipfile

import numpy as np


def arrays():
    return {
        "f32": (np.arange(12, dtype=np.float32).reshape(3, 4) * 0.25 - 1),
        "f64": np.arange(5, dtype=np.float64) / 3.0,
        "i64": np.arange(6, dtype=np.int64).reshape(2, 3) * 10**10 - 5,
        "i32": np.array([-2, -1, 0, 2**31 - 1], dtype=np.int32),
        "u8": np.array([[0, 255], [7, 128]], dtype=np.uint8),
        "b": np.array([True, False, True, True, False]),
        "i8": np.array([-128, 0, 127], dtype=np.int8),
        "f16": np.array([1.5, -2.0], dtype=np.float16),
        "scalar": np.array(3.5, dtype=np.float32),
        "empty": np.zeros((0, 3), dtype=np.float32),
        # Large enough for several deflate blocks.
        "big": np.sin(np.arange(100000, dtype=np.float64)).astype(np.float32),
    }


def main(out):
    os.makedirs(out, exist_ok=True)
    a = arrays()
    np.savez(os.path.join(out, "plain.npz"), **a)
    np.savez_compressed(os.path.join(out, "compressed.npz"), **a)

    # Feeding: 10 samples; x row i = [3i, 3i+1, 3i+2], y[i] = i.
    x = np.arange(30, dtype=np.float32).reshape(10, 3)
    y = np.arange(10, dtype=np.int64)
    np.savez(os.path.join(out, "feed.npz"), x=x, y=y, y_short=y[:9],
             img=np.arange(10 * 2 * 2, dtype=np.uint8).reshape(10, 2, 2))
    np.savez_compressed(os.path.join(out, "feed_compressed.npz"), x=x, y=y)

    # Broken inputs.
    np.savez(os.path.join(out, "fortran.npz"),
             m=np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))
    np.savez(os.path.join(out, "bigendian.npz"), m=np.arange(4, dtype=">f4"))
    np.savez(os.path.join(out, "complex.npz"), m=np.zeros(2, dtype=np.complex64))
    # A usable array beside one this loader refuses, and a member added twice.
    np.savez(os.path.join(out, "mixed.npz"), x=np.arange(6, dtype=np.float32),
             m=np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))
    with zipfile.ZipFile(os.path.join(out, "twice.npz"), "w") as z:
        for value in (1.0, 2.0):
            buf = io.BytesIO()
            np.save(buf, np.full(3, value, dtype=np.float32))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # zipfile warns of the duplicate
                z.writestr("x.npy", buf.getvalue())
    with open(os.path.join(out, "notzip.npz"), "wb") as f:
        f.write(b"this is not a zip archive at all, just text" * 3)
    with open(os.path.join(out, "plain.npz"), "rb") as f:
        data = f.read()
    with open(os.path.join(out, "truncated.npz"), "wb") as f:
        f.write(data[: len(data) // 2])
    # Flip one byte inside the stored data of 'f32' (after its .npy header).
    with zipfile.ZipFile(os.path.join(out, "plain.npz")) as z:
        info = z.getinfo("f32.npy")
    # The local header's extra field may differ from the central one: read it.
    name_len = int.from_bytes(data[info.header_offset + 26:info.header_offset + 28], "little")
    extra_len = int.from_bytes(data[info.header_offset + 28:info.header_offset + 30], "little")
    start = info.header_offset + 30 + name_len + extra_len
    bad = bytearray(data)
    bad[start + info.file_size - 3] ^= 0xFF
    with open(os.path.join(out, "badcrc.npz"), "wb") as f:
        f.write(bytes(bad))

    try:
        import onnx  # noqa: F401
    except ImportError:
        print("gen_fixtures: onnx is not installed", file=sys.stderr)
        return 1
    make_models(out)
    return 0


def make_models(out):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    # y = Reshape(x @ W + b, shape) ; W, b trainable, shape an int64 initializer.
    W = numpy_helper.from_array(np.zeros((3, 4), dtype=np.float32), "W")
    b = numpy_helper.from_array(np.full((4,), 0.5, dtype=np.float32), "b")
    shape = numpy_helper.from_array(np.array([-1, 2, 2], dtype=np.int64), "shape")
    E = numpy_helper.from_array(np.arange(8, dtype=np.float32).reshape(2, 4), "E")
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["xw"]),
        helper.make_node("Add", ["xw", "b"], ["h"]),
        helper.make_node("Reshape", ["h", "shape"], ["y"]),
        helper.make_node("Gather", ["E", "zero"], ["E_row"], axis=0),
        helper.make_node("Add", ["h", "E_row"], ["z"]),
    ]
    zero = numpy_helper.from_array(np.array(0, dtype=np.int64), "zero")
    graph = helper.make_graph(
        nodes, "pipert_test",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2, 2]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 4])],
        initializer=[W, b, shape, E, zero])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save_model(model, os.path.join(out, "model.onnx"))

    # The same model with every initializer in an external data file.
    ext_dir = os.path.join(out, "external")
    os.makedirs(ext_dir, exist_ok=True)
    onnx.save_model(model, os.path.join(ext_dir, "model.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
