#!/usr/bin/env python3
"""A small reference interpreter for pipec's onnx dialect, in numpy.

Reads a module printed by `pipe-opt --mlir-print-op-generic` and evaluates a
function on numpy arrays, in float64 whatever the declared float types (so
that finite differences are accurate). It knows the forward ops the
importer produces and the gradient / optimizer ops of OnnxGradientOps.td,
each written from its documented semantics, independently of the compiler.
Used by the gradient checks (gradcheck.py) until the lowering can run the
same checks through compiled code.
"""
import math
import re

import numpy as np

# --------------------------------------------------------------------------
# Parsing the generic form
# --------------------------------------------------------------------------


class Dense:
    def __init__(self, value):
        self.value = value


class Resource:
    def __init__(self, name, type_):
        self.name, self.type = name, type_


class TensorType:
    def __init__(self, shape, elt):
        self.shape, self.elt = shape, elt

    def dtype(self):
        if self.elt.startswith("f") or self.elt.startswith("bf"):
            return np.float64
        if self.elt == "i1":
            return np.bool_
        return np.int64

    def __repr__(self):
        return "tensor<%s%s>" % ("".join("%dx" % d for d in self.shape), self.elt)


class Parser:
    ident = re.compile(r"[A-Za-z_][A-Za-z0-9_.$\-]*")
    number = re.compile(r"[-+]?(0x[0-9A-Fa-f]+|(\d+\.?\d*([eE][-+]?\d+)?)|inf|nan)")

    def __init__(self, text, pos=0):
        self.s, self.i = text, pos

    def ws(self):
        while self.i < len(self.s) and self.s[self.i] in " \t\n":
            self.i += 1

    def peek(self, lit):
        self.ws()
        return self.s.startswith(lit, self.i)

    def eat(self, lit):
        if self.peek(lit):
            self.i += len(lit)
            return True
        return False

    def expect(self, lit):
        if not self.eat(lit):
            raise SyntaxError("expected %r at %r" % (lit, self.s[self.i:self.i + 60]))

    def string(self):
        self.expect('"')
        out = []
        while self.s[self.i] != '"':
            if self.s[self.i] == "\\":
                nxt = self.s[self.i + 1]
                if nxt in '"\\':
                    out.append(nxt)
                    self.i += 2
                    continue
                out.append(chr(int(self.s[self.i + 1:self.i + 3], 16)))
                self.i += 3
                continue
            out.append(self.s[self.i])
            self.i += 1
        self.i += 1
        return "".join(out)

    def word(self):
        self.ws()
        m = self.ident.match(self.s, self.i)
        if not m:
            raise SyntaxError("expected a name at %r" % self.s[self.i:self.i + 60])
        self.i = m.end()
        return m.group(0)

    def type(self):
        self.ws()
        if self.eat("tensor<"):
            j = self.s.index(">", self.i)
            body = self.s[self.i:j]
            self.i = j + 1
            parts = body.split("x")
            if parts[0] == "*":
                return TensorType(None, parts[1])
            return TensorType([int(p) for p in parts[:-1]], parts[-1])
        if self.peek("("):
            self.expect("(")
            ins = []
            while not self.eat(")"):
                ins.append(self.type())
                self.eat(",")
            if self.eat("->"):
                return ("fn", ins, self.results())
            return ins
        return self.word()

    def results(self):
        if self.peek("("):
            self.expect("(")
            out = []
            while not self.eat(")"):
                out.append(self.type())
                self.eat(",")
            return out
        return [self.type()]

    def scalar(self):
        self.ws()
        m = self.number.match(self.s, self.i)
        if not m:
            raise SyntaxError("expected a number at %r" % self.s[self.i:self.i + 60])
        self.i = m.end()
        t = m.group(0)
        if t.startswith("0x") or t.startswith("-0x"):
            return ("hex", int(t, 16))
        if t in ("inf", "-inf", "+inf", "nan"):
            return float(t)
        return float(t) if any(c in t for c in ".eE") else int(t)

    def dense_body(self):
        if self.peek("["):
            self.expect("[")
            out = []
            while not self.eat("]"):
                out.append(self.dense_body())
                self.eat(",")
            return out
        if self.peek('"'):
            return ("raw", self.string())
        if self.eat("true"):
            return 1
        if self.eat("false"):
            return 0
        if self.peek("("):  # complex: unsupported
            raise SyntaxError("complex constants are not supported")
        return self.scalar()

    def attr(self):
        self.ws()
        if self.peek("{"):
            return self.dict()
        if self.eat("["):
            out = []
            while not self.eat("]"):
                out.append(self.attr())
                self.eat(",")
            return out
        if self.peek('"'):
            return self.string()
        if self.eat("dense_resource<"):
            name = self.s[self.i:self.s.index(">", self.i)]
            self.i += len(name) + 1
            self.expect(":")
            return Resource(name, self.type())
        if self.eat("dense<"):
            body = self.dense_body()
            self.expect(">")
            self.expect(":")
            t = self.type()
            return Dense(make_dense(body, t))
        if self.eat("array<"):
            elt = self.word()
            vals = []
            if self.eat(":"):
                while not self.peek(">"):
                    vals.append(self.scalar())
                    self.eat(",")
            self.expect(">")
            return list(vals)
        if self.eat("true"):
            return True
        if self.eat("false"):
            return False
        if self.eat("unit"):
            return True
        if self.peek("(") or self.peek("tensor<"):
            return self.type()
        v = self.scalar()
        if self.eat(":"):
            t = self.type()
            if isinstance(v, tuple):
                v = bits_to_float(v[1], t)
        return v

    def dict(self):
        self.expect("{")
        out = {}
        while not self.eat("}"):
            key = self.string() if self.peek('"') else self.word()
            out[key] = self.attr() if self.eat("=") else True
            self.eat(",")
        return out


def bits_to_float(bits, t):
    elt = t if isinstance(t, str) else t.elt
    if elt == "f32":
        return float(np.frombuffer(np.uint32(bits).tobytes(), np.float32)[0])
    if elt == "f64":
        return float(np.frombuffer(np.uint64(bits).tobytes(), np.float64)[0])
    return bits


def np_storage(elt):
    return {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i64": np.int64,
            "i32": np.int32, "i8": np.int8, "ui8": np.uint8, "i1": np.bool_}[elt]


def make_dense(body, t):
    if isinstance(body, tuple) and body[0] == "raw":
        raw = bytes.fromhex(body[1][2:])
        arr = np.frombuffer(raw, np_storage(t.elt))
        n = int(np.prod(t.shape))
        arr = np.broadcast_to(arr, (n,)) if arr.size == 1 else arr
        return arr.reshape(t.shape).astype(t.dtype())

    def conv(v):
        if isinstance(v, list):
            return [conv(x) for x in v]
        if isinstance(v, tuple):
            return bits_to_float(v[1], t)
        return v
    arr = np.array(conv(body), dtype=t.dtype())
    return np.broadcast_to(arr, t.shape).copy() if arr.ndim == 0 else arr.reshape(t.shape)


class Op:
    def __init__(self, results, name, operands, attrs, result_types):
        self.results, self.name = results, name
        self.operands, self.attrs, self.result_types = operands, attrs, result_types


class Func:
    def __init__(self, name, arg_attrs, arg_types, res_attrs, res_types):
        self.name, self.arg_attrs, self.arg_types = name, arg_attrs, arg_types
        self.res_attrs, self.res_types = res_attrs, res_types
        self.args, self.ops, self.ret = [], [], []

    def arg_index(self, key, value):
        for i, a in enumerate(self.arg_attrs):
            if a.get(key) == value:
                return i
        raise KeyError("%s=%s" % (key, value))


OP_LINE = re.compile(r'\s*(?:(%[\w#]+)(?::(\d+))? = )?"([\w.]+)"\((.*?)\)')


def parse_module(text):
    funcs, resources = {}, {}
    lines = text.split("\n")
    cur = None
    k = 0
    while k < len(lines):
        line = lines[k]
        k += 1
        s = line.strip()
        if s.startswith('"func.func"'):
            p = Parser(s, s.index("<{") + 1)
            props = p.dict()
            ft = props["function_type"]
            cur = Func(props["sym_name"], props.get("arg_attrs") or [{} for _ in ft[1]],
                       ft[1], props.get("res_attrs") or [{} for _ in ft[2]], ft[2])
            funcs[cur.name] = cur
            continue
        if s.startswith("^bb0(") and cur is not None:
            cur.args = re.findall(r"(%[\w]+):", s)
            continue
        if s.startswith("dialect_resources"):
            for rest in lines[k:]:
                m = re.match(r'\s*([\w.$\-]+): "0x([0-9A-Fa-f]*)"', rest)
                if m:
                    resources[m.group(1)] = bytes.fromhex(m.group(2))[4:]
            break
        m = OP_LINE.match(line)
        if not m or cur is None:
            continue
        res, count, name, operands = m.group(1), m.group(2), m.group(3), m.group(4)
        operands = [o.strip() for o in operands.split(",") if o.strip()]
        p = Parser(line, m.end())
        attrs = {}
        if p.peek("<{"):
            p.expect("<")
            attrs.update(p.dict())
            p.expect(">")
        if p.peek("{"):
            attrs.update(p.dict())
        p.expect(":")
        ft = p.type()
        if name == "func.return":
            cur.ret = operands
            continue
        if res is None:
            results = []
        elif count:
            results = ["%s#%d" % (res, i) for i in range(int(count))]
        else:
            results = [res]
        cur.ops.append(Op(results, name, operands, attrs, ft[2]))
    return funcs, resources


def resource_value(resources, res):
    t = res.type
    return np.frombuffer(resources[res.name], np_storage(t.elt)).reshape(t.shape).astype(t.dtype())


def init_value(func, i, resources):
    init = func.arg_attrs[i].get("pipe.init")
    if init is None:
        return None
    if isinstance(init, Resource):
        return resource_value(resources, init)
    return init.value.copy()


# --------------------------------------------------------------------------
# Ops
# --------------------------------------------------------------------------

OPS = {}


def op(name):
    def reg(fn):
        OPS["onnx." + name] = fn
        return fn
    return reg


def erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def norm_axis(a, rank):
    return a + rank if a < 0 else a


for _n, _f in {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply,
               "Pow": np.power, "Equal": np.equal}.items():
    OPS["onnx." + _n] = (lambda f: lambda a, x, y: f(x, y))(_f)


@op("Div")
def _div(a, x, y):
    if np.issubdtype(np.asarray(x).dtype, np.integer):
        return np.trunc(x / y).astype(np.int64)
    return x / y


OPS["onnx.Neg"] = lambda a, x: -x
OPS["onnx.Relu"] = lambda a, x: np.maximum(x, 0)
OPS["onnx.Tanh"] = lambda a, x: np.tanh(x)
OPS["onnx.Sigmoid"] = lambda a, x: 1 / (1 + np.exp(-x))
OPS["onnx.Erf"] = lambda a, x: erf(x)
OPS["onnx.Sqrt"] = lambda a, x: np.sqrt(x)
OPS["onnx.Exp"] = lambda a, x: np.exp(x)
OPS["onnx.Sin"] = lambda a, x: np.sin(x)
OPS["onnx.Cos"] = lambda a, x: np.cos(x)
OPS["onnx.Log"] = lambda a, x: np.log(x)
OPS["onnx.Identity"] = lambda a, x: x
OPS["onnx.Where"] = lambda a, c, x, y: np.where(c, x, y)
OPS["onnx.Abs"] = lambda a, x: np.abs(x)
OPS["onnx.Reciprocal"] = lambda a, x: 1 / x
OPS["onnx.Sign"] = lambda a, x: np.sign(x)
OPS["onnx.Floor"] = lambda a, x: np.floor(x)
OPS["onnx.Ceil"] = lambda a, x: np.ceil(x)
OPS["onnx.Softplus"] = lambda a, x: np.logaddexp(0, x)
OPS["onnx.HardSwish"] = lambda a, x: x * np.clip(x / 6 + 0.5, 0, 1)
OPS["onnx.LeakyRelu"] = lambda a, x: np.where(x < 0, a.get("alpha", 0.01) * x, x)
OPS["onnx.Elu"] = lambda a, x: np.where(x > 0, x, a.get("alpha", 1.0) * (np.exp(x) - 1))
OPS["onnx.Selu"] = lambda a, x: a.get("gamma", 1.0507009873554805) * np.where(
    x > 0, x, a.get("alpha", 1.6732632423543772) * (np.exp(x) - 1))
OPS["onnx.HardSigmoid"] = lambda a, x: np.clip(a.get("alpha", 0.2) * x + a.get("beta", 0.5), 0, 1)
OPS["onnx.Not"] = lambda a, x: np.logical_not(x)
OPS["onnx.And"] = lambda a, x, y: np.logical_and(x, y)
OPS["onnx.Or"] = lambda a, x, y: np.logical_or(x, y)
OPS["onnx.Less"] = lambda a, x, y: np.less(x, y)
OPS["onnx.LessOrEqual"] = lambda a, x, y: np.less_equal(x, y)
OPS["onnx.Greater"] = lambda a, x, y: np.greater(x, y)
OPS["onnx.GreaterOrEqual"] = lambda a, x, y: np.greater_equal(x, y)
OPS["onnx.Max"] = lambda a, x, y: np.maximum(x, y)
OPS["onnx.Min"] = lambda a, x, y: np.minimum(x, y)


@op("Gelu")
def _gelu(a, x):
    if a.get("approximate", "none") == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


@op("Clip")
def _clip(a, x, lo, hi):
    if lo is not None:
        x = np.maximum(x, lo)
    if hi is not None:
        x = np.minimum(x, hi)
    return x


@op("Mod")
def _mod(a, x, y):
    return np.fmod(x, y) if a.get("fmod", 0) else np.mod(x, y)


OPS["onnx.NoValue"] = lambda a: None
OPS["onnx.Constant"] = lambda a: a["value"].value if isinstance(a["value"], Dense) else a["value"]


@op("Cast")
def _cast(a, x):
    to = a["to"]
    if to in (1, 10, 11, 16):
        return np.asarray(x, np.float64)
    if to == 9:
        return np.asarray(x) != 0
    return np.trunc(np.asarray(x, np.float64)).astype(np.int64) if np.asarray(x).dtype.kind == "f" else np.asarray(x, np.int64)


@op("Gemm")
def _gemm(a, A, B, C):
    A = A.T if a.get("transA", 0) else A
    B = B.T if a.get("transB", 0) else B
    y = a.get("alpha", 1.0) * (A @ B)
    if C is not None:
        y = y + a.get("beta", 1.0) * C
    return y


OPS["onnx.MatMul"] = lambda a, x, y: np.matmul(x, y)


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


OPS["onnx.Softmax"] = lambda a, x: softmax(x, a.get("axis", -1))


def log_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


OPS["onnx.LogSoftmax"] = lambda a, x: log_softmax(x, a.get("axis", -1))


@op("LayerNormalization")
def _ln(a, x, scale, b, nresults=1):
    axis = norm_axis(a.get("axis", -1), x.ndim)
    axes = tuple(range(axis, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    inv = 1 / np.sqrt(var + a.get("epsilon", 1e-5))
    y = (x - mean) * inv * scale
    if b is not None:
        y = y + b
    return [y, mean, inv][:nresults]


@op("BatchNormalization")
def _bn(a, x, scale, b, mean, var, nresults=1):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    eps = a.get("epsilon", 1e-5)
    if a.get("training_mode", 0):
        axes = (0,) + tuple(range(2, x.ndim))
        bm, bv = x.mean(axis=axes), x.var(axis=axes)
        mom = a.get("momentum", 0.9)
        y = (x - bm.reshape(shape)) / np.sqrt(bv.reshape(shape) + eps) * scale.reshape(shape) + b.reshape(shape)
        return [y, mean * mom + bm * (1 - mom), var * mom + bv * (1 - mom)][:nresults]
    return [(x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * scale.reshape(shape) + b.reshape(shape)]


def window(a, x, kernel):
    n = len(kernel)
    strides = list(a.get("strides") or [1] * n)
    dil = list(a.get("dilations") or [1] * n)
    pads = list(a.get("pads") or [0] * (2 * n))
    auto = a.get("auto_pad", "NOTSET")
    if auto == "VALID":
        pads = [0] * (2 * n)
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        for i in range(n):
            inp, s = x.shape[i + 2], strides[i]
            out = -(-inp // s)
            total = max(0, (out - 1) * s + (kernel[i] - 1) * dil[i] + 1 - inp)
            small, large = total // 2, total - total // 2
            pads[i], pads[i + n] = (small, large) if auto == "SAME_UPPER" else (large, small)
    return strides, dil, pads


def as2d(x):
    return x if x.ndim == 4 else x[:, :, None, :]


def pool_out(inp, k, pb, pe, s, d, ceil):
    ext = d * (k - 1) + 1
    num = inp + pb + pe - ext
    if ceil:
        o = -(-num // s) + 1
        if (o - 1) * s >= inp + pb:
            o -= 1
        return o
    return num // s + 1


def patches(xp, k, s, d, out):
    """(N, C, oH, oW, kH*kW) windows of a padded 4-D array."""
    cols = []
    for i in range(k[0]):
        for j in range(k[1]):
            cols.append(xp[:, :, i * d[0]: i * d[0] + s[0] * (out[0] - 1) + 1: s[0],
                           j * d[1]: j * d[1] + s[1] * (out[1] - 1) + 1: s[1]])
    return np.stack(cols, axis=-1)


def conv_setup(a, x, w):
    k = list(w.shape[2:])
    s, d, p = window(a, x, k)
    if x.ndim == 3:
        k, s, d, p = [1] + k, [1] + s, [1] + d, [0, p[0], 0, p[1]]
    return k, s, d, p


def conv2d(x, w, s, d, p, group):
    x = np.pad(x, ((0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])))
    k = w.shape[2:]
    out = [(x.shape[2] - d[0] * (k[0] - 1) - 1) // s[0] + 1, (x.shape[3] - d[1] * (k[1] - 1) - 1) // s[1] + 1]
    cols = patches(x, k, s, d, out)  # N C oH oW K
    cg, mg = x.shape[1] // group, w.shape[0] // group
    ys = []
    for g in range(group):
        wg = w[g * mg:(g + 1) * mg].reshape(mg, cg, -1)
        ys.append(np.einsum("nchwk,mck->nmhw", cols[:, g * cg:(g + 1) * cg], wg))
    return np.concatenate(ys, axis=1)


@op("Conv")
def _conv(a, x, w, b):
    k, s, d, p = conv_setup(a, x, w)
    y = conv2d(as2d(x), as2d(w), s, d, p, a.get("group", 1))
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1)
    return y if x.ndim == 4 else y[:, :, 0, :]


@op("ConvTranspose")
def _convt(a, x, w, b):
    # Scatter form: input pixel (h, w) adds x * W[c, m, i, j] at output
    # (h * s + i * d - pad); output_shape / auto_pad pads as the ONNX
    # reference computes them.
    n = x.ndim - 2
    k = list(w.shape[2:])
    s = list(a.get("strides") or [1] * n)
    d = list(a.get("dilations") or [1] * n)
    op_ = list(a.get("output_padding") or [0] * n)
    p = list(a.get("pads") or [0] * (2 * n))
    auto = a.get("auto_pad", "NOTSET")
    natural = [s[i] * (x.shape[i + 2] - 1) + op_[i] + (k[i] - 1) * d[i] + 1 for i in range(n)]
    target = a.get("output_shape")
    if target is not None:
        target = list(target)[-n:]
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        target = [x.shape[i + 2] * s[i] for i in range(n)]
    if auto == "VALID":
        p = [0] * (2 * n)
    if target is not None:
        for i in range(n):
            total = natural[i] - target[i]
            p[i], p[i + n] = ((total // 2, total - total // 2) if auto == "SAME_UPPER"
                              else (total - total // 2, total // 2))
    if n == 1:
        x, w = x[:, :, None, :], w[:, :, None, :]
        k, s, d, op_, p, natural = [1] + k, [1] + s, [1] + d, [0] + op_, [0, p[0], 0, p[1]], [1] + natural
    group = a.get("group", 1)
    cg, mg = x.shape[1] // group, w.shape[1]
    full = np.zeros((x.shape[0], mg * group, natural[0], natural[1]))
    for g in range(group):
        for i in range(k[0]):
            for j in range(k[1]):
                full[:, g * mg:(g + 1) * mg,
                     i * d[0]: i * d[0] + s[0] * (x.shape[2] - 1) + 1: s[0],
                     j * d[1]: j * d[1] + s[1] * (x.shape[3] - 1) + 1: s[1]] += np.einsum(
                    "nchw,cm->nmhw", x[:, g * cg:(g + 1) * cg], w[g * cg:(g + 1) * cg, :, i, j])
    y = full[:, :, p[0]:natural[0] - p[2], p[1]:natural[1] - p[3]]
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1)
    return y if n == 2 else y[:, :, 0, :]


def resize_matrices(a, in_shape, out_shape, scales, roi):
    """Per axis the (out, in) interpolation matrix and the rows outside a
    tf_crop_and_resize roi, from the ONNX definitions (float64)."""
    mode = a.get("mode", "nearest")
    coord = a.get("coordinate_transformation_mode", "half_pixel")
    nearest = a.get("nearest_mode", "round_prefer_floor")
    A = a.get("cubic_coeff_a", -0.75)
    mats, outside = [], []
    for ax, (n_in, n_out) in enumerate(zip(in_shape, out_shape)):
        sc = float(scales[ax]) if scales is not None else n_out / n_in
        # The resized length of the coordinate transforms: in * scale, as the
        # ONNX reference has it (fractional when the product is).
        length = n_in * sc if scales is not None else n_out
        m = np.zeros((n_out, n_in))
        out_mask = np.zeros(n_out, bool)
        for o in range(n_out):
            if coord == "half_pixel":
                xo = (o + 0.5) / sc - 0.5
            elif coord == "asymmetric":
                xo = o / sc
            elif coord == "align_corners":
                xo = 0.0 if length == 1 else o * (n_in - 1) / (length - 1)
            elif coord == "pytorch_half_pixel":
                xo = (o + 0.5) / sc - 0.5 if length > 1 else 0.0
            elif coord == "tf_half_pixel_for_nn":
                xo = (o + 0.5) / sc
            elif coord == "tf_crop_and_resize":
                st, en = float(roi[ax]), float(roi[ax + len(in_shape)])
                xo = (st * (n_in - 1) + o * (en - st) * (n_in - 1) / (length - 1) if length > 1
                      else 0.5 * (st + en) * (n_in - 1))
                if xo < 0 or xo > n_in - 1:
                    out_mask[o] = True
                    continue
            else:
                raise NotImplementedError(coord)
            if n_in == n_out and sc == 1.0 and coord != "tf_crop_and_resize":
                xo = float(o)
            clamp = lambda i: min(max(i, 0), n_in - 1)
            f = math.floor(xo)
            t = xo - f
            if mode == "nearest":
                r = {"round_prefer_floor": f if t == 0.5 else round(xo),
                     "round_prefer_ceil": f + 1 if t == 0.5 else round(xo),
                     "floor": f, "ceil": math.ceil(xo)}[nearest]
                m[o, clamp(int(r))] += 1
            elif mode == "linear":
                m[o, clamp(f)] += 1 - t
                m[o, clamp(f + 1)] += t
            else:
                def cub(z):
                    z = abs(z)
                    if z <= 1:
                        return ((A + 2) * z - (A + 3)) * z * z + 1
                    if z < 2:
                        return ((A * z - 5 * A) * z + 8 * A) * z - 4 * A
                    return 0.0
                taps = [f - 1 + q for q in range(4)]
                wts = [cub(xo - i) for i in taps]
                if a.get("exclude_outside", 0):
                    wts = [0.0 if (i < 0 or i >= n_in) else v for i, v in zip(taps, wts)]
                    tot = sum(wts)
                    wts = [v / tot for v in wts]
                for i, v in zip(taps, wts):
                    m[o, clamp(i)] += v
        mats.append(m)
        outside.append(out_mask)
    return mats, outside


def apply_axis(x, m, ax):
    return np.moveaxis(np.tensordot(m, x, axes=([1], [ax])), 0, ax)


def resize_setup(a, x, roi, scales, sizes):
    r = x.ndim
    axes = [v % r for v in (a.get("axes") or range(r))]
    sc = None
    out = list(x.shape)
    full_roi = [0.0] * r + [1.0] * r
    if roi is not None and np.size(roi) and a.get("coordinate_transformation_mode") == "tf_crop_and_resize":
        roi = np.asarray(roi).reshape(-1)
        for i, ax in enumerate(axes):
            full_roi[ax], full_roi[ax + r] = float(roi[i]), float(roi[i + len(axes)])
    if scales is not None and np.size(scales):
        sc = [1.0] * r
        for i, ax in enumerate(axes):
            sc[ax] = float(np.float32(np.asarray(scales).reshape(-1)[i]))
            out[ax] = int(math.floor(x.shape[ax] * (full_roi[ax + r] - full_roi[ax]) * sc[ax]))
    else:
        for i, ax in enumerate(axes):
            out[ax] = int(np.asarray(sizes).reshape(-1)[i])
    return out, sc, full_roi


@op("Resize")
def _resize(a, x, roi, scales, sizes):
    out, sc, full_roi = resize_setup(a, x, roi, scales, sizes)
    mats, outside = resize_matrices(a, x.shape, out, sc, full_roi)
    y = x
    for ax, m in enumerate(mats):
        y = apply_axis(y, m, ax)
    for ax, mask in enumerate(outside):
        if mask.any():
            idx = [slice(None)] * y.ndim
            idx[ax] = mask
            y[tuple(idx)] = a.get("extrapolation_value", 0.0)
    return y


@op("ResizeGrad")
def _resize_grad(a, dy, shape):
    shape = [int(v) for v in shape]
    r = len(shape)
    roi = a.get("roi") or [0.0] * r + [1.0] * r
    mats, outside = resize_matrices(a, shape, dy.shape, a.get("scales"), roi)
    g = dy.copy()
    for ax, mask in enumerate(outside):
        if mask.any():
            idx = [slice(None)] * g.ndim
            idx[ax] = mask
            g[tuple(idx)] = 0.0
    for ax, m in enumerate(mats):
        g = apply_axis(g, m.T, ax)
    return g


def pool_setup(a, x):
    k = list(a["kernel_shape"])
    s, d, p = window(a, x, k)
    if x.ndim == 3:
        k, s, d, p = [1] + k, [1] + s, [1] + d, [0, p[0], 0, p[1]]
    x4 = as2d(x)
    ceil = a.get("ceil_mode", 0)
    out = [pool_out(x4.shape[2 + i], k[i], p[i], p[i + 2], s[i], d[i], ceil) for i in range(2)]
    # pad the end far enough for ceil_mode windows
    extra = [max(0, (out[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1 - (x4.shape[2 + i] + p[i] + p[i + 2])) for i in range(2)]
    return x4, k, s, d, p, out, extra


@op("MaxPool")
def _maxpool(a, x, nresults=1):
    x4, k, s, d, p, out, extra = pool_setup(a, x)
    xp = np.pad(x4, ((0, 0), (0, 0), (p[0], p[2] + extra[0]), (p[1], p[3] + extra[1])), constant_values=-np.inf)
    y = patches(xp, k, s, d, out).max(axis=-1)
    return [y if x.ndim == 4 else y[:, :, 0, :]]


def avg_divisor(x4, k, s, p, out, extra, include_pad):
    ones = np.ones((1, 1) + x4.shape[2:])
    if include_pad:
        ones = np.pad(ones, ((0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])), constant_values=1)
        ones = np.pad(ones, ((0, 0), (0, 0), (0, extra[0]), (0, extra[1])))
    else:
        ones = np.pad(ones, ((0, 0), (0, 0), (p[0], p[2] + extra[0]), (p[1], p[3] + extra[1])))
    return patches(ones, k, s, [1, 1], out).sum(axis=-1)


@op("AveragePool")
def _avgpool(a, x):
    x4, k, s, d, p, out, extra = pool_setup(a, x)
    xp = np.pad(x4, ((0, 0), (0, 0), (p[0], p[2] + extra[0]), (p[1], p[3] + extra[1])))
    y = patches(xp, k, s, [1, 1], out).sum(axis=-1) / avg_divisor(x4, k, s, p, out, extra, a.get("count_include_pad", 0))
    return y if x.ndim == 4 else y[:, :, 0, :]


OPS["onnx.GlobalAveragePool"] = lambda a, x: x.mean(axis=tuple(range(2, x.ndim)), keepdims=True)


def dropout_mask(key, shape, ratio):
    rng = np.random.default_rng(abs(hash(key)) % (2 ** 32))
    return rng.random(shape) >= ratio


@op("Dropout")
def _dropout(a, x, ratio, training, nresults=1, key=None):
    r = 0.5 if ratio is None else float(ratio)
    if training is None or not bool(training) or r == 0:
        return [x, np.ones(x.shape, np.bool_)][:nresults]
    mask = dropout_mask(key, x.shape, r)
    return [x * mask / (1 - r), mask][:nresults]


def reduce_axes(a, x, axes):
    if axes is None or len(axes) == 0:
        if a.get("noop_with_empty_axes", 0):
            return None
        return tuple(range(x.ndim))
    return tuple(norm_axis(int(i), x.ndim) for i in axes)


@op("ReduceSum")
def _rsum(a, x, axes):
    ax = reduce_axes(a, x, axes)
    return x if ax is None else x.sum(axis=ax, keepdims=bool(a.get("keepdims", 1)))


@op("ReduceMean")
def _rmean(a, x, axes):
    ax = reduce_axes(a, x, axes)
    return x if ax is None else x.mean(axis=ax, keepdims=bool(a.get("keepdims", 1)))


@op("ReduceMax")
def _rmax(a, x, axes):
    ax = reduce_axes(a, x, axes)
    return x if ax is None else x.max(axis=ax, keepdims=bool(a.get("keepdims", 1)))


@op("ReduceMin")
def _rmin(a, x, axes):
    ax = reduce_axes(a, x, axes)
    return x if ax is None else x.min(axis=ax, keepdims=bool(a.get("keepdims", 1)))


def _arg(a, x, fn):
    axis = norm_axis(a.get("axis", 0), x.ndim)
    if a.get("select_last_index", 0):
        flipped = np.flip(x, axis)
        r = x.shape[axis] - 1 - fn(flipped, axis=axis)
    else:
        r = fn(x, axis=axis)
    r = r.astype(np.int64)
    return np.expand_dims(r, axis) if a.get("keepdims", 1) else r


OPS["onnx.ArgMax"] = lambda a, x: _arg(a, x, np.argmax)
OPS["onnx.ArgMin"] = lambda a, x: _arg(a, x, np.argmin)


@op("CumSum")
def _cumsum(a, x, axis):
    ax = norm_axis(int(np.asarray(axis).reshape(-1)[0]), x.ndim)
    if a.get("reverse", 0):
        x = np.flip(x, ax)
    y = np.cumsum(x, axis=ax)
    if a.get("exclusive", 0):
        y = y - x
    return np.flip(y, ax) if a.get("reverse", 0) else y


OPS["onnx.Tile"] = lambda a, x, reps: np.tile(x, [int(r) for r in reps])


def full_pads(x, pads, axes):
    r = x.ndim
    axes = list(range(r)) if axes is None else [norm_axis(int(i), r) for i in axes]
    full = [0] * (2 * r)
    for i, ax in enumerate(axes):
        full[ax] = int(pads[i])
        full[ax + r] = int(pads[i + len(axes)])
    return full


@op("Pad")
def _pad(a, x, pads, value, axes):
    r = x.ndim
    full = full_pads(x, pads, axes)
    # Negative pads crop first.
    crop = tuple(slice(max(-full[i], 0), x.shape[i] - max(-full[i + r], 0)) for i in range(r))
    x = x[crop]
    width = [(max(full[i], 0), max(full[i + r], 0)) for i in range(r)]
    mode = a.get("mode", "constant")
    if mode == "constant":
        v = 0.0 if value is None else np.asarray(value).reshape(-1)[0]
        return np.pad(x, width, mode="constant", constant_values=v)
    return np.pad(x, width, mode=mode)


@op("Trilu")
def _trilu(a, x, k):
    k = 0 if k is None else int(np.asarray(k).reshape(-1)[0])
    return np.triu(x, k) if a.get("upper", 1) else np.tril(x, k)


def nll(a, logp, labels, weights):
    c = logp.shape[1]
    ignore = a.get("ignore_index")
    lab = labels.astype(np.int64)
    valid = np.ones(lab.shape, bool) if ignore is None else lab != ignore
    safe = np.where(valid, lab, 0)
    picked = np.take_along_axis(logp, safe[:, None], axis=1)[:, 0]
    w = np.ones(c) if weights is None else weights
    wl = np.where(valid, w[safe], 0.0)
    loss = -picked * wl
    red = a.get("reduction", "mean")
    if red == "none":
        return loss, wl, valid, safe
    if red == "sum":
        return loss.sum(), wl, valid, safe
    return loss.sum() / wl.sum(), wl, valid, safe


@op("SoftmaxCrossEntropyLoss")
def _sce(a, scores, labels, weights, nresults=1):
    logp = log_softmax(scores, 1)
    return [nll(a, logp, labels, weights)[0], logp][:nresults]


OPS["onnx.NegativeLogLikelihoodLoss"] = lambda a, x, t, w: nll(a, x, t, w)[0]
OPS["onnx.Shape"] = lambda a, x: np.array(x.shape[a.get("start", 0):a.get("end", x.ndim)], np.int64)


@op("Reshape")
def _reshape(a, x, shape):
    shape = [x.shape[i] if (v == 0 and not a.get("allowzero", 0)) else int(v) for i, v in enumerate(shape)]
    return x.reshape(shape)


OPS["onnx.Flatten"] = lambda a, x: x.reshape(int(np.prod(x.shape[:norm_axis(a.get("axis", 1), x.ndim)])), -1)
OPS["onnx.Transpose"] = lambda a, x: np.transpose(x, a.get("perm"))
OPS["onnx.Concat"] = lambda a, *xs: np.concatenate(xs, axis=a["axis"])


@op("Split")
def _split(a, x, split, nresults=1):
    axis = norm_axis(a.get("axis", 0), x.ndim)
    if split is None:
        n = a.get("num_outputs", nresults)
        size = -(-x.shape[axis] // n)
        split = [min(size, x.shape[axis] - i * size) for i in range(n)]
    idx = np.cumsum(split)[:-1]
    return np.split(x, idx, axis=axis)


def slice_index(x_shape, starts, ends, axes, steps):
    idx = [slice(None)] * len(x_shape)
    axes = range(len(starts)) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    for st, en, ax, sp in zip(starts, ends, axes, steps):
        ax = norm_axis(int(ax), len(x_shape))
        dim = x_shape[ax]
        st, en, sp = int(st), int(en), int(sp)
        st = st + dim if st < 0 else st
        en = en + dim if en < 0 else en
        if sp > 0:
            st, en = min(max(st, 0), dim), min(max(en, 0), dim)
        else:
            st, en = min(max(st, -1), dim - 1), min(max(en, -1), dim - 1)
            en = None if en < 0 else en
        idx[ax] = slice(st, en, sp)
    return tuple(idx)


OPS["onnx.Slice"] = lambda a, x, st, en, ax, sp: x[slice_index(x.shape, st, en, ax, sp)]


@op("Gather")
def _gather(a, x, idx):
    axis = norm_axis(a.get("axis", 0), x.ndim)
    idx = np.where(idx < 0, idx + x.shape[axis], idx)
    return np.take(x, idx, axis=axis)


@op("Unsqueeze")
def _unsqueeze(a, x, axes):
    rank = x.ndim + len(axes)
    for ax in sorted(norm_axis(int(i), rank) for i in axes):
        x = np.expand_dims(x, ax)
    return x


@op("Squeeze")
def _squeeze(a, x, axes):
    if axes is None:
        return np.squeeze(x)
    return np.squeeze(x, axis=tuple(norm_axis(int(i), x.ndim) for i in axes))


OPS["onnx.Expand"] = lambda a, x, shape: x * np.ones(tuple(int(v) for v in shape), dtype=x.dtype) if x.dtype != np.bool_ else np.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(int(v) for v in shape)))
OPS["onnx.Range"] = lambda a, s, l, d: np.arange(s, l, d)
OPS["onnx.ConstantOfShape"] = lambda a, shape: np.full(tuple(int(v) for v in shape), a["value"].value.reshape(-1)[0] if "value" in a else 0.0)

# ---- gradient ops (OnnxGradientOps.td) ----

OPS["onnx.ReluGrad"] = lambda a, x, dy: dy * (x > 0)


@op("UnaryGrad")
def _unary_grad(a, x, dy):
    # The derivative of each activation, written independently of the
    # kernels (runtime/core/formulas.h) so that a wrong kernel shows.
    k, al, be = a["activation"], a.get("alpha", 0.0), a.get("beta", 0.0)
    if k == "LeakyRelu":
        d = np.where(x > 0, 1.0, al)
    elif k == "Elu":
        d = np.where(x > 0, 1.0, al * np.exp(x))
    elif k == "Selu":
        d = be * np.where(x > 0, 1.0, al * np.exp(x))
    elif k == "Softplus":
        d = 1 / (1 + np.exp(-x))
    elif k == "HardSigmoid":
        v = al * x + be
        d = np.where((v > 0) & (v < 1), al, 0.0)
    elif k == "HardSwish":
        d = np.where(x < -3, 0.0, np.where(x <= 3, x / 3 + 0.5, 1.0))
    elif k == "Gelu":
        d = 0.5 * (1 + erf(x / math.sqrt(2))) + x * np.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    elif k == "GeluTanh":
        c = math.sqrt(2 / math.pi)
        t = np.tanh(c * (x + 0.044715 * x ** 3))
        d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x)
    elif k == "Abs":
        d = np.sign(x)
    elif k == "Reciprocal":
        d = -1 / (x * x)
    else:
        raise ValueError("UnaryGrad: unknown activation " + k)
    return dy * d
OPS["onnx.TanhGrad"] = lambda a, y, dy: dy * (1 - y * y)
OPS["onnx.SigmoidGrad"] = lambda a, y, dy: dy * y * (1 - y)
OPS["onnx.ErfGrad"] = lambda a, x, dy: dy * 2 / math.sqrt(math.pi) * np.exp(-x * x)


@op("ReduceToShape")
def _r2s(a, dy, shape):
    shape = [int(v) for v in shape]
    lead = dy.ndim - len(shape)
    g = dy.sum(axis=tuple(range(lead))) if lead else dy
    axes = tuple(i for i, d in enumerate(shape) if d == 1 and g.shape[i] != 1)
    return g.sum(axis=axes, keepdims=True) if axes else g


@op("SoftmaxGrad")
def _smg(a, y, dy):
    ax = a.get("axis", -1)
    return y * (dy - (dy * y).sum(axis=ax, keepdims=True))


OPS["onnx.LogSoftmaxGrad"] = lambda a, y, dy: dy - np.exp(y) * dy.sum(axis=a.get("axis", -1), keepdims=True)


@op("LayerNormalizationGrad")
def _lng(a, x, scale, mean, inv, dy, nresults=3):
    axis = norm_axis(a.get("axis", -1), x.ndim)
    axes = tuple(range(axis, x.ndim))
    outer = tuple(range(axis))
    xhat = (x - mean) * inv
    dscale = (dy * xhat).sum(axis=outer)
    db = dy.sum(axis=outer)
    g = dy * scale
    n = int(np.prod([x.shape[i] for i in axes]))
    dx = inv * (g - g.sum(axis=axes, keepdims=True) / n - xhat * (g * xhat).sum(axis=axes, keepdims=True) / n)
    return [dx, dscale, db]


@op("BatchNormalizationGrad")
def _bng(a, x, scale, dy, nresults=3):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    axes = (0,) + tuple(range(2, x.ndim))
    n = x.size // x.shape[1]
    mean = x.mean(axis=axes)
    inv = 1.0 / np.sqrt(x.var(axis=axes) + a.get("epsilon", 1e-5))
    xhat = (x - mean.reshape(shape)) * inv.reshape(shape)
    db = dy.sum(axis=axes)
    dscale = (dy * xhat).sum(axis=axes)
    dx = scale.reshape(shape) * inv.reshape(shape) / n * (n * dy - db.reshape(shape) - xhat * dscale.reshape(shape))
    return [dx, dscale, db]


@op("ConvGrad")
def _convg(a, dy, x, w, nresults=3):
    group = a.get("group", 1)
    s, d, p = list(a["strides"]), list(a["dilations"]), list(a["pads"])
    if x.ndim == 3:
        s, d, p = [1] + s, [1] + d, [0, p[0], 0, p[1]]
    x4, w4, dy4 = as2d(x), as2d(w), as2d(dy)
    xp = np.pad(x4, ((0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])))
    k = w4.shape[2:]
    out = dy4.shape[2:]
    cg, mg = x4.shape[1] // group, w4.shape[0] // group
    dxp = np.zeros_like(xp)
    dw = np.zeros_like(w4)
    for g in range(group):
        cs, ms = slice(g * cg, (g + 1) * cg), slice(g * mg, (g + 1) * mg)
        for i in range(k[0]):
            for j in range(k[1]):
                hs = slice(i * d[0], i * d[0] + s[0] * (out[0] - 1) + 1, s[0])
                ws = slice(j * d[1], j * d[1] + s[1] * (out[1] - 1) + 1, s[1])
                dxp[:, cs, hs, ws] += np.einsum("nmhw,mc->nchw", dy4[:, ms], w4[ms, :, i, j])
                dw[ms, :, i, j] += np.einsum("nmhw,nchw->mc", dy4[:, ms], xp[:, cs, hs, ws])
    dx = dxp[:, :, p[0]:p[0] + x4.shape[2], p[1]:p[1] + x4.shape[3]]
    db = dy4.sum(axis=(0, 2, 3))
    if x.ndim == 3:
        dx, dw = dx[:, :, 0, :], dw[:, :, 0, :]
    return [dx, dw, db]


def scatter_windows(shape4, p, extra, k, s, d, out, contrib):
    """Adds contrib (N, C, oH, oW, K) back into a padded zero array, then crops."""
    big = np.zeros((shape4[0], shape4[1], shape4[2] + p[0] + p[2] + extra[0], shape4[3] + p[1] + p[3] + extra[1]))
    t = 0
    for i in range(k[0]):
        for j in range(k[1]):
            big[:, :, i * d[0]: i * d[0] + s[0] * (out[0] - 1) + 1: s[0],
                j * d[1]: j * d[1] + s[1] * (out[1] - 1) + 1: s[1]] += contrib[..., t]
            t += 1
    return big[:, :, p[0]:p[0] + shape4[2], p[1]:p[1] + shape4[3]]


@op("MaxPoolGrad")
def _mpg(a, x, dy):
    x4, k, s, d, p, out, extra = pool_setup(a, x)
    xp = np.pad(x4, ((0, 0), (0, 0), (p[0], p[2] + extra[0]), (p[1], p[3] + extra[1])), constant_values=-np.inf)
    cols = patches(xp, k, s, d, out)
    first = cols.argmax(axis=-1)
    contrib = np.zeros(cols.shape)
    np.put_along_axis(contrib, first[..., None], as2d(dy)[..., None], axis=-1)
    dx = scatter_windows(x4.shape, p, extra, k, s, d, out, contrib)
    return dx if x.ndim == 4 else dx[:, :, 0, :]


@op("AveragePoolGrad")
def _apg(a, dy, shape):
    x = np.zeros(tuple(int(v) for v in shape))
    x4, k, s, d, p, out, extra = pool_setup(a, x)
    div = avg_divisor(x4, k, s, p, out, extra, a.get("count_include_pad", 0))
    contrib = np.repeat((as2d(dy) / div)[..., None], k[0] * k[1], axis=-1)
    dx = scatter_windows(x4.shape, p, extra, k, s, [1, 1], out, contrib)
    return dx if x.ndim == 4 else dx[:, :, 0, :]


@op("GlobalAveragePoolGrad")
def _gapg(a, dy, shape):
    shape = tuple(int(v) for v in shape)
    return np.broadcast_to(dy, shape) / np.prod(shape[2:])


@op("ReduceExtremumGrad")
def _rext_grad(a, x, dy, axes):
    # dy to the first extremum of each group, found by a plain loop.
    ax = reduce_axes(a, x, axes)
    if ax is None:
        return dy
    kept = [i for i in range(x.ndim) if i not in ax]
    dyk = dy.reshape([x.shape[i] for i in kept])
    dx = np.zeros_like(x)
    best = {}
    for idx in np.ndindex(*x.shape):
        key = tuple(idx[i] for i in kept)
        v = x[idx]
        if key not in best:
            best[key] = (v, idx)
        elif (v < best[key][0]) if a.get("select_min", 0) else (v > best[key][0]):
            best[key] = (v, idx)
    for key, (_, idx) in best.items():
        dx[idx] = dyk[key]
    return dx


@op("TileGrad")
def _tile_grad(a, dy, shape, reps):
    shape = [int(d) for d in shape]
    split = []
    for r, d in zip(reps, shape):
        split += [int(r), d]
    return dy.reshape(split).sum(axis=tuple(range(0, 2 * len(shape), 2)))


@op("PadGrad")
def _pad_grad(a, dy, shape, pads):
    # The transpose of Pad, by pushing each basis vector through it.
    shape = tuple(int(d) for d in shape)
    dx = np.zeros(shape)
    for idx in np.ndindex(*shape):
        e = np.zeros(shape)
        e[idx] = 1.0
        dx[idx] = (_pad(a, e, pads, None, None) * dy).sum()
    return dx


@op("SliceGrad")
def _sg(a, dy, shape, st, en, ax, sp):
    dx = np.zeros(tuple(int(v) for v in shape))
    dx[slice_index(dx.shape, st, en, ax, sp)] = dy
    return dx


@op("GatherGrad")
def _gg(a, dy, shape, idx):
    shape = tuple(int(v) for v in shape)
    axis = norm_axis(a.get("axis", 0), len(shape))
    idx = np.where(idx < 0, idx + shape[axis], idx)
    dx = np.zeros(shape)
    moved = np.moveaxis(dx, axis, 0)
    dyv = np.moveaxis(dy.reshape(shape[:axis] + (idx.size,) + shape[axis + 1:]), axis, 0)
    np.add.at(moved, idx.reshape(-1), dyv)
    return dx


@op("DropoutGrad")
def _dg(a, dy, mask, ratio, training):
    if training is None or not bool(training):
        return dy
    r = 0.5 if ratio is None else float(ratio)
    return dy * mask / (1 - r)


@op("SoftmaxCrossEntropyLossGrad")
def _sceg(a, dloss, logp, labels, weights):
    _, wl, valid, safe = nll(a, logp, labels, weights)
    red = a.get("reduction", "mean")
    scale = wl * (dloss if red == "none" else float(dloss))
    if red == "mean":
        scale = scale / wl.sum()
    onehot = np.zeros(logp.shape)
    np.put_along_axis(onehot, safe[:, None], 1.0, axis=1)
    return (np.exp(logp) - onehot) * np.expand_dims(scale, 1)


@op("NegativeLogLikelihoodLossGrad")
def _nllg(a, dloss, shape, target, weight):
    shape = tuple(int(v) for v in shape)
    _, wl, valid, safe = nll(a, np.zeros(shape), target, weight)
    red = a.get("reduction", "mean")
    scale = wl * (dloss if red == "none" else float(dloss))
    if red == "mean":
        scale = scale / wl.sum()
    dx = np.zeros(shape)
    np.put_along_axis(dx, safe[:, None], -np.expand_dims(scale, 1), axis=1)
    return dx


# ---- optimizer updates (ai.onnx.preview.training and OnnxGradientOps.td) ----

OPS["onnx.SGD"] = lambda a, r, x, g: x - r * (g + a.get("weight_decay", 0.0) * x)


@op("AdamW")
def _adamw(a, r, t, x, g, m, v, nresults=3):
    b1, b2, eps, wd = a.get("beta1", 0.9), a.get("beta2", 0.999), a.get("epsilon", 1e-8), a.get("weight_decay", 0.01)
    t = int(t)
    x = x * (1 - r * wd)
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    x = x - r / (1 - b1 ** t) * m / (np.sqrt(v / (1 - b2 ** t)) + eps)
    return [x, m, v]


@op("Momentum")
def _momentum(a, r, t, *xs, nresults=2):
    n = len(xs) // 3
    alpha, beta, nc = a["alpha"], a["beta"], a["norm_coefficient"]
    outx, outv = [], []
    for x, g, v in zip(xs[:n], xs[n:2 * n], xs[2 * n:]):
        g = nc * x + g
        if a["mode"] == "nesterov":
            v = alpha * v + g
            x = x - r * (g + alpha * v)
        else:
            v = alpha * v + (beta if int(t) > 0 else 1.0) * g
            x = x - r * v
        outx.append(x)
        outv.append(v)
    return outx + outv


@op("Adagrad")
def _adagrad(a, r, t, *xs, nresults=2):
    n = len(xs) // 3
    lr = r / (1 + int(t) * a.get("decay_factor", 0.0))
    outx, outh = [], []
    for x, g, h in zip(xs[:n], xs[n:2 * n], xs[2 * n:]):
        g = a.get("norm_coefficient", 0.0) * x + g
        h = h + g * g
        outx.append(x - lr * g / (np.sqrt(h) + a.get("epsilon", 1e-6)))
        outh.append(h)
    return outx + outh


@op("Adam")
def _adam(a, r, t, *xs, nresults=3):
    n = len(xs) // 4
    al, be, eps = a.get("alpha", 0.9), a.get("beta", 0.999), a.get("epsilon", 1e-6)
    nc, ncp = a.get("norm_coefficient", 0.0), a.get("norm_coefficient_post", 0.0)
    t = int(t)
    ox, ov, oh = [], [], []
    for x, g, v, h in zip(xs[:n], xs[n:2 * n], xs[2 * n:3 * n], xs[3 * n:]):
        g = nc * x + g
        v = al * v + (1 - al) * g
        h = be * h + (1 - be) * g * g
        lr = r * math.sqrt(1 - be ** t) / (1 - al ** t) if t > 0 else r
        ox.append((1 - ncp) * (x - lr * v / (np.sqrt(h) + eps)))
        ov.append(v)
        oh.append(h)
    return ox + ov + oh


# Recurrent (ONNX LSTM / GRU, layout 0, default activations) and their
# gradients (BPTT written out independently of the runtime's).
def sig(v):
    return 1 / (1 + np.exp(-v))


def rnn_setup(a, x, w, r, b, h0, gates):
    d = a.get("direction", "forward")
    revs = {"forward": [False], "reverse": [True], "bidirectional": [False, True]}[d]
    T, B, _ = x.shape
    H = r.shape[2]
    if b is None:
        b = np.zeros((len(revs), 2 * gates * H))
    if h0 is None:
        h0 = np.zeros((len(revs), B, H))
    return revs, T, B, H, b, h0


def lstm_steps(x, w, r, b, h0, c0, rev):
    """One direction: per processing step (t, h_prev, c_prev, i, o, f, g, c)."""
    H = r.shape[1]
    h, c, out = h0, c0, []
    for t in (reversed(range(x.shape[0])) if rev else range(x.shape[0])):
        a = x[t] @ w.T + h @ r.T + b[:4 * H] + b[4 * H:]
        i, o, f, g = sig(a[:, :H]), sig(a[:, H:2 * H]), sig(a[:, 2 * H:3 * H]), np.tanh(a[:, 3 * H:])
        cn = f * c + i * g
        out.append((t, h, c, i, o, f, g, cn))
        h, c = o * np.tanh(cn), cn
    return out


def saved_steps(saved, d, D, T, h0, c0, rev, planes):
    """The training form's saved states (D * planes * T, B, H), direction d:
    per processing step (t, h_prev, [c_prev,] the activations..., [c]) as
    lstm_steps / gru_steps give them (planes: LSTM h c i o f g, GRU h z r n
    rn-or-r*h_prev)."""
    B, H = saved.shape[1], saved.shape[2]
    p = saved.reshape(D, planes, T, B, H)[d]
    order = list(reversed(range(T))) if rev else list(range(T))
    out = []
    for s, t in enumerate(order):
        hp = h0 if s == 0 else p[0][order[s - 1]]
        if planes == 6:
            cp = c0 if s == 0 else p[1][order[s - 1]]
            out.append((t, hp, cp, p[2][t], p[3][t], p[4][t], p[5][t], p[1][t]))
        else:
            out.append((t, hp, p[1][t], p[2][t], p[3][t], p[4][t]))
    return out


@op("LSTM")
def _lstm(a, x, w, r, b, lens, h0, c0, p, nresults=1):
    revs, T, B, H, b, h0 = rnn_setup(a, x, w, r, b, h0, 4)
    if c0 is None:
        c0 = np.zeros_like(h0)
    D = len(revs)
    y, yh, yc = np.zeros((T, D, B, H)), np.zeros((D, B, H)), np.zeros((D, B, H))
    saved = np.zeros((D, 6, T, B, H))
    for d, rev in enumerate(revs):
        for (t, _, _, i, o, f, g, cn) in lstm_steps(x, w[d], r[d], b[d], h0[d], c0[d], rev):
            y[t, d] = o * np.tanh(cn)
            yh[d], yc[d] = y[t, d], cn
            for k, v in enumerate((y[t, d], cn, i, o, f, g)):
                saved[d, k, t] = v
    return [y, yh, yc, saved.reshape(D * 6 * T, B, H)][:nresults]


@op("LSTMGrad")
def _lstm_grad(a, x, w, r, b, h0, c0, dy, dyh, dyc, saved=None, nresults=6):
    revs, T, B, H, b, h0 = rnn_setup(a, x, w, r, b, h0, 4)
    if c0 is None:
        c0 = np.zeros_like(h0)

    def steps(d, rev):  # the forward's saved states, or recomputed
        if saved is not None:
            return saved_steps(saved, d, len(revs), T, h0[d], c0[d], rev, 6)
        return lstm_steps(x, w[d], r[d], b[d], h0[d], c0[d], rev)
    dx, dw, dr, db = np.zeros_like(x), np.zeros_like(w), np.zeros_like(r), np.zeros_like(b)
    dh0, dc0 = np.zeros_like(h0), np.zeros_like(c0)
    for d, rev in enumerate(revs):
        dh = np.zeros((B, H)) if dyh is None else dyh[d].copy()
        dc = np.zeros((B, H)) if dyc is None else dyc[d].copy()
        for (t, hp, cp, i, o, f, g, cn) in reversed(steps(d, rev)):
            if dy is not None:
                dh = dh + dy[t, d]
            tc = np.tanh(cn)
            dc = dc + dh * o * (1 - tc * tc)
            da = np.concatenate([dc * g * i * (1 - i), dh * tc * o * (1 - o),
                                 dc * cp * f * (1 - f), dc * i * (1 - g * g)], axis=1)
            dx[t] += da @ w[d]
            dw[d] += da.T @ x[t]
            dr[d] += da.T @ hp
            db[d, :4 * H] += da.sum(0)
            db[d, 4 * H:] += da.sum(0)
            dh, dc = da @ r[d], dc * f
        dh0[d], dc0[d] = dh, dc
    return [dx, dw, dr, db, dh0, dc0][:nresults]


def gru_steps(x, w, r, b, h0, rev, lbr):
    """One direction: per processing step (t, h_prev, z, r, n, rn)."""
    H = r.shape[1]
    h, out = h0, []
    for t in (reversed(range(x.shape[0])) if rev else range(x.shape[0])):
        gx = x[t] @ w.T + b[:3 * H]
        gh = h @ r.T + b[3 * H:]
        z = sig(gx[:, :H] + gh[:, :H])
        rr = sig(gx[:, H:2 * H] + gh[:, H:2 * H])
        if lbr:
            rn = gh[:, 2 * H:]
            n = np.tanh(gx[:, 2 * H:] + rr * rn)
        else:
            rn = None
            n = np.tanh(gx[:, 2 * H:] + (rr * h) @ r[2 * H:].T + b[5 * H:])
        out.append((t, h, z, rr, n, rn))
        h = (1 - z) * n + z * h
    return out


@op("GRU")
def _gru(a, x, w, r, b, lens, h0, nresults=1):
    revs, T, B, H, b, h0 = rnn_setup(a, x, w, r, b, h0, 3)
    D = len(revs)
    y, yh = np.zeros((T, D, B, H)), np.zeros((D, B, H))
    saved = np.zeros((D, 5, T, B, H))
    for d, rev in enumerate(revs):
        for (t, hp, z, rr, n, rn) in gru_steps(x, w[d], r[d], b[d], h0[d], rev,
                                               a.get("linear_before_reset", 0)):
            y[t, d] = (1 - z) * n + z * hp
            yh[d] = y[t, d]
            for k, v in enumerate((y[t, d], z, rr, n, rr * hp if rn is None else rn)):
                saved[d, k, t] = v
    return [y, yh, saved.reshape(D * 5 * T, B, H)][:nresults]


@op("GRUGrad")
def _gru_grad(a, x, w, r, b, h0, dy, dyh, saved=None, nresults=5):
    revs, T, B, H, b, h0 = rnn_setup(a, x, w, r, b, h0, 3)
    lbr = a.get("linear_before_reset", 0)

    def steps(d, rev):  # the forward's saved states, or recomputed
        if saved is None:
            return gru_steps(x, w[d], r[d], b[d], h0[d], rev, lbr)
        return [(t, hp, z, rr, n, rn if lbr else None)
                for (t, hp, z, rr, n, rn) in saved_steps(saved, d, len(revs), T, h0[d], None,
                                                        rev, 5)]
    dx, dw, dr, db = np.zeros_like(x), np.zeros_like(w), np.zeros_like(r), np.zeros_like(b)
    dh0 = np.zeros_like(h0)
    for d, rev in enumerate(revs):
        dh = np.zeros((B, H)) if dyh is None else dyh[d].copy()
        Rzr, Rh = r[d][:2 * H], r[d][2 * H:]
        for (t, hp, z, rr, n, rn) in reversed(steps(d, rev)):
            if dy is not None:
                dh = dh + dy[t, d]
            dan = dh * (1 - z) * (1 - n * n)
            daz = dh * (hp - n) * z * (1 - z)
            if lbr:
                dar = dan * rn * rr * (1 - rr)
                dghn = dan * rr
                through_r = dghn @ Rh
            else:
                drh = dan @ Rh  # gradient of r * h_prev
                dar = drh * hp * rr * (1 - rr)
                dghn = dan
                through_r = drh * rr
            dgx = np.concatenate([daz, dar, dan], axis=1)
            dgh = np.concatenate([daz, dar, dghn], axis=1)
            dx[t] += dgx @ w[d]
            dw[d] += dgx.T @ x[t]
            dr[d][:2 * H] += dgh[:, :2 * H].T @ hp
            dr[d][2 * H:] += dghn.T @ (hp if lbr else rr * hp)
            db[d, :3 * H] += dgx.sum(0)
            db[d, 3 * H:] += dgh.sum(0)
            dh = dh * z + dgh[:, :2 * H] @ Rzr + through_r
        dh0[d] = dh
    return [dx, dw, dr, db, dh0][:nresults]

def attention_heads(a, q, k, v):
    """Q, K, V of an onnx.Attention(Grad) as (B, H, L, dh) arrays, and a
    function that puts (B, H, T, dh) results back into Y's layout."""
    if q.ndim == 4:
        return q, k, v, lambda y: y
    h = a["q_num_heads"]
    if k is None:  # a fused (B, T, 3*H*dh) projection
        d = q.shape[2] // 3
        q, k, v = q[..., :d], q[..., d:2 * d], q[..., 2 * d:]

    def split(x):
        b, t, d = x.shape
        return x.reshape(b, t, h, d // h).transpose(0, 2, 1, 3)

    def merge(y):
        b, hh, t, dh = y.shape
        return y.transpose(0, 2, 1, 3).reshape(b, t, hh * dh)
    return split(q), split(k), split(v), merge


def attention_scale(a, dh):
    return a["scale"] if "scale" in a else 1.0 / math.sqrt(dh)


@op("Attention")
def _attention(a, q, k, v, mask, nresults=1):
    qh, kh, vh, merge = attention_heads(a, q, k, v)
    t, s = qh.shape[2], kh.shape[2]
    sc = attention_scale(a, qh.shape[3]) * (qh @ kh.swapaxes(-1, -2))
    attend = np.ones((t, s), dtype=bool)
    if a.get("is_causal", 0):
        attend &= np.tril(np.ones((t, s), dtype=bool))
    if mask is not None:
        attend &= mask.astype(bool)
    p = softmax(np.where(attend, sc, -np.inf), -1)
    return [merge(p @ vh), p][:nresults]


@op("AttentionGrad")
def _attention_grad(a, q, k, v, p, dy, nresults=3):
    qh, kh, vh, merge = attention_heads(a, q, k, v)
    scale = attention_scale(a, qh.shape[3])
    if q.ndim == 3:
        b, t, d = dy.shape
        dy = dy.reshape(b, t, a["q_num_heads"], -1).transpose(0, 2, 1, 3)
    dv = p.swapaxes(-1, -2) @ dy
    dp = dy @ vh.swapaxes(-1, -2)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    dq, dk = scale * (ds @ kh), scale * (ds.swapaxes(-1, -2) @ qh)
    dq, dk, dv = merge(dq), merge(dk), merge(dv)
    if k is None:
        return [np.concatenate([dq, dk, dv], axis=-1)]
    return [dq, dk, dv]


MULTI = {"onnx.LayerNormalization", "onnx.BatchNormalization", "onnx.MaxPool", "onnx.Dropout",
         "onnx.SoftmaxCrossEntropyLoss", "onnx.Split", "onnx.LayerNormalizationGrad",
         "onnx.BatchNormalizationGrad", "onnx.ConvGrad", "onnx.AdamW", "onnx.Momentum",
         "onnx.Adagrad", "onnx.Adam", "onnx.LSTM", "onnx.GRU", "onnx.LSTMGrad",
         "onnx.GRUGrad", "onnx.Attention", "onnx.AttentionGrad"}


def run(func, args):
    """Evaluates `func` on the list of numpy arrays `args`; returns its results."""
    env = dict(zip(func.args, args))
    for k, o in enumerate(func.ops):
        fn = OPS.get(o.name)
        if fn is None:
            raise NotImplementedError("onnx_eval: no implementation of " + o.name)
        ins = [env[v] for v in o.operands]
        if o.name in MULTI:
            kw = {"nresults": len(o.results)}
            if o.name == "onnx.Dropout":
                kw["key"] = (func.name, k)
            outs = fn(o.attrs, *ins, **kw)
        else:
            outs = [fn(o.attrs, *ins)]
        for r, v, t in zip(o.results, outs, o.result_types):
            if v is not None and isinstance(t, TensorType):
                v = np.asarray(v).astype(t.dtype())
                if t.shape is not None and list(v.shape) != t.shape:
                    raise ValueError("onnx_eval: %s gave shape %s, IR says %s" % (o.name, v.shape, t))
            env[r] = v
    return [env[v] for v in func.ret]
