#!/usr/bin/env python3
"""Independent stage-level PyTorch reference for SpecTrain and PipeMare.

    stage_reference.py --model mlp --onnx initial.onnx --data D.npz
        --plan plan.json --log steps.jsonl --steps K --batch B
        --microbatches M --method spectrain|pipemare|pipedream
        [--lr-warmup K] [--discrepancy-correction GAMMA]
        --optimizer sgd|momentum|nesterov|adam|adamw|adagrad --lr F
        [--momentum 0.9] [--weight-decay F] [--rtol 1e-5]
        [--saved trained.onnx] [--next ARGS...]
    stage_reference.py --self-test

Simulates METHODS.md's "Asynchronous, staleness-aware methods" (SpecTrain,
PipeMare) one update at a time and compares a pipe-run step log (and, with
--saved, the trained weights) with it, printing the same OK/FAIL lines as
async_reference.py. Notation as there: p stages s = 0..p-1, M micro-batches
per step, B samples per step; step t reads rows t*B .. t*B+B-1 (wrapping, no
shuffle), its micro-batch j is rows j*B/M .. (j+1)*B/M - 1 of them, and
u = t*M + j. tau_s = p-1-s. W_s(k) is stage s's weights after k updates.
There is no flush: every stage does exactly one update per micro-batch, and
stage s's update for micro-batch u is its update number k = u (0-based),
producing W_s(u+1).

Why stage level. In these methods the forward and the backward of one
micro-batch on stage s use DIFFERENT weights, F_s(u) and B_s(u). pipec
defines "the backward of stage s on weights B_s" as a recompute: it is the
vector-Jacobian product of stage s's function at (x_s, B_s), where x_s are the
values stage s reads from other stages and the data *as the forward computed
them* (with F), i.e. stage s's nodes are re-run from x_s with B_s and the
gradients of the stage's outputs are back-propagated through that. The result
therefore depends on which ONNX nodes form each stage, so this reference
interprets the ONNX graph itself in torch, node by node (a small
differentiable interpreter, `OnnxGraph`), and splits it by plan.json's
"node_stages" (node name -> stage).

For micro-batch u = 0, 1, 2, ... in order:
  1. forward weights, per stage:
       spectrain  F_s = W_s(k) - tau_s * lr * v_s(k), k = max(u - tau_s, 0),
                  v_s(k) the optimizer's direction after k updates of stage s
                  (zero when k = 0): momentum/nesterov torch's
                  `momentum_buffer`; adam/adamw m_hat/(sqrt(v_hat)+eps),
                  m_hat = exp_avg/(1-beta1^k), v_hat = exp_avg_sq/(1-beta2^k);
                  plain sgd the last gradient applied (the raw micro-batch
                  gradient, without weight decay). Weight decay is never
                  added to the prediction. adagrad is refused.
       pipemare   F_s = W_s(max(u - tau_s, 0)) (no stashing: the weights
                  current when the forward ran).
       pipedream  F_s = W_s(max(u - tau_s, 0)) (cross-check with
                  async_reference.py).
  2. forward of every node with its stage's F (a node reads each parameter
     at the version of the stage that owns it); every value is kept; f_u is
     the graph output (the micro-batch's mean loss).
  3. backward weights: spectrain B_s = W_s(u) (d = 0 in pipec's 1F1B order);
     pipemare B_s = W_s(u) - tau_s * delta_s with T2, else W_s(u);
     pipedream B_s = F_s.
  4. backward, s = p-1 down to 0: stage s's inputs (values its nodes read that
     other stages, constants or the data produced) are detached (floating
     values from other stages require grad), its nodes are recomputed with
     B_s, and torch.autograd.grad of its outputs (values it produces that
     other stages read, and the loss if it computes it) with their
     accumulated output gradients (the loss's is 1) gives the gradient of
     B_s's parameters and of its inputs; an input's gradient is added to the
     value that produced it (a value read by several stages accumulates from
     all of them).
  5. each stage's torch optimizer (`make_optimizer`, one per stage) applies
     the gradient: W_s(u+1) = opt(W_s(u), g_s).
       PipeMare T1 (--lr-warmup K >= 1): stage s's lr at its update k = u is
         lr * tau_s ** -(1 - min(k/K, 1)) for tau_s >= 1, else lr (lr/tau_s
         at k = 0, rising geometrically to lr at k = K). K = 0: lr.
       PipeMare T2 (--discrepancy-correction GAMMA, 0 <= GAMMA < 1): after
         each update delta_s <- GAMMA*delta_s + (1-GAMMA)*(W_s(u+1) - W_s(u)),
         delta_s = 0 before the first; only stages with tau_s >= 1.
  6. a logged step's loss is the mean of its M micro-batch losses f_u.
Only the versions u - tau_s .. u of each stage (and, for SpecTrain, the
directions at those counts) are kept.

Graph details. Trainable parameters are the initializers listed in plan.json's
device_plans "parameters" (the owner is the device's single stage); other
initializers are constants. A node missing from node_stages whose inputs are
all constants (shape arithmetic, Constant) is evaluated once, as a constant;
one that reads a parameter or a stage's value is put on the latest stage
among the owners/producers of what it reads (stage 0 for data only). Shape
constants may bake the export batch into Reshape targets (Constant 24 ->
Unsqueeze -> Concat -> Reshape in the transformer): a micro-batch has B/M
rows, so when a Reshape target's leading entry equals the exported batch
(the graph inputs' leading dimension) while the input's leading dimension is
the micro-batch's row count (and differs from it), that entry is replaced by
the actual row count (see `OnnxGraph._reshape`).

The stage of each parameter comes from plan.json's "device_plans" (read with
async_reference.read_plan); a plan without device_plans means p = 1. Run with
Debian's /usr/bin/python3 (torch 1.13, onnx); `--next` starts another check in
the same process. --self-test checks the interpreter against the torch models,
pipedream against async_reference.simulate and the formulas against
hand-written closed forms.
"""
import argparse
import copy
import json
import math
import os
import shutil
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as Fn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from async_reference import read_plan, simulate, step_microbatches  # noqa: E402
from reference_common import (add_check_arguments, check_losses,  # noqa: E402
                              check_saved, fail, load_initial, make_optimizer,
                              models, read_log, run_checks)

# ONNX TensorProto data type -> torch dtype (the ones Cast may name).
DTYPES = {1: torch.float32, 2: torch.uint8, 3: torch.int8, 5: torch.int16,
          6: torch.int32, 7: torch.int64, 9: torch.bool, 10: torch.float16,
          11: torch.float64, 16: torch.bfloat16}


def _attrs(node):
    from onnx import helper, numpy_helper
    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if a.type == a.TENSOR:
            v = torch.from_numpy(numpy_helper.to_array(v).copy())
        elif isinstance(v, bytes):
            v = v.decode()
        out[a.name] = v
    return out


class OnnxGraph:
    """The ONNX graph at `path`, evaluated node by node with torch ops
    (differentiable where the op is)."""

    def __init__(self, path):
        import onnx
        from onnx import numpy_helper
        m = onnx.load(path)
        g = m.graph
        self.opset = max([o.version for o in m.opset_import
                          if o.domain in ("", "ai.onnx")] or [13])
        self.initializers = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy())
                             for t in g.initializer}
        self.inputs = [i.name for i in g.input if i.name not in self.initializers]
        self.output = g.output[0].name
        first = [i for i in g.input if i.name == self.inputs[0]][0] if self.inputs else None
        dims = first.type.tensor_type.shape.dim if first is not None else []
        self.export_batch = dims[0].dim_value if dims and dims[0].HasField("dim_value") else None
        self.nodes = []
        for i, n in enumerate(g.node):
            self.nodes.append({"name": n.name or f"#{i}", "op": n.op_type,
                               "inputs": list(n.input), "outputs": list(n.output),
                               "attrs": _attrs(n)})
        self.rows = None  # rows of the batch being evaluated

    # -- ops -----------------------------------------------------------------
    def _reshape(self, x, shape, allowzero=0):
        shape = [int(v) for v in shape.tolist()]
        shape = [x.shape[i] if v == 0 and not allowzero else v
                 for i, v in enumerate(shape)]
        # The export batch baked into a shape constant: use the actual rows.
        if (shape and self.export_batch and self.rows is not None
                and self.rows != self.export_batch and shape[0] == self.export_batch
                and x.dim() > 0 and x.shape[0] == self.rows):
            shape[0] = self.rows
        return x.reshape(shape)

    def run_node(self, node, args):
        op, a = node["op"], node["attrs"]
        nout = len(node["outputs"])
        if op == "Gemm":
            A, Bm = args[0], args[1]
            if a.get("transA", 0):
                A = A.t()
            if a.get("transB", 0):
                Bm = Bm.t()
            y = a.get("alpha", 1.0) * (A @ Bm)
            if len(args) > 2 and args[2] is not None:
                y = y + a.get("beta", 1.0) * args[2]
            return [y]
        if op == "Relu":
            return [torch.relu(args[0])]
        if op == "Tanh":
            return [torch.tanh(args[0])]
        if op == "Sigmoid":
            return [torch.sigmoid(args[0])]
        if op == "Erf":
            return [torch.erf(args[0])]
        if op == "Sqrt":
            return [torch.sqrt(args[0])]
        if op == "Neg":
            return [-args[0]]
        if op == "Identity":
            return [args[0]]
        if op in ("Add", "Sub", "Mul", "Div", "Pow"):
            x, y = args
            if op == "Add":
                return [x + y]
            if op == "Sub":
                return [x - y]
            if op == "Mul":
                return [x * y]
            if op == "Pow":
                return [torch.pow(x, y)]
            if not x.is_floating_point() and not y.is_floating_point():
                return [torch.div(x, y, rounding_mode="trunc")]
            return [x / y]
        if op == "MatMul":
            return [torch.matmul(args[0], args[1])]
        if op == "Conv":
            x, w = args[0], args[1]
            b = args[2] if len(args) > 2 else None
            nd = w.dim() - 2
            if a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
                raise NotImplementedError(f"Conv auto_pad {a['auto_pad']}")
            pads = list(a.get("pads", [0] * 2 * nd))
            strides = a.get("strides", [1] * nd)
            dil = a.get("dilations", [1] * nd)
            conv = {1: Fn.conv1d, 2: Fn.conv2d, 3: Fn.conv3d}[nd]
            if pads[:nd] == pads[nd:]:
                return [conv(x, w, b, strides, pads[:nd], dil, a.get("group", 1))]
            pad = []
            for i in reversed(range(nd)):
                pad += [pads[i], pads[i + nd]]
            return [conv(Fn.pad(x, pad), w, b, strides, 0, dil, a.get("group", 1))]
        if op == "MaxPool":
            x = args[0]
            k = a["kernel_shape"]
            nd = len(k)
            if a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
                raise NotImplementedError(f"MaxPool auto_pad {a['auto_pad']}")
            pads = list(a.get("pads", [0] * 2 * nd))
            if pads[:nd] != pads[nd:] or nout > 1:
                raise NotImplementedError("MaxPool with asymmetric pads or indices")
            pool = {1: Fn.max_pool1d, 2: Fn.max_pool2d, 3: Fn.max_pool3d}[nd]
            return [pool(x, k, a.get("strides", [1] * nd), pads[:nd],
                         a.get("dilations", [1] * nd), bool(a.get("ceil_mode", 0)))]
        if op == "Flatten":
            x = args[0]
            ax = a.get("axis", 1)
            ax = ax + x.dim() if ax < 0 else ax
            lead = int(np.prod(x.shape[:ax])) if ax > 0 else 1
            return [x.reshape(lead, -1)]
        if op == "SoftmaxCrossEntropyLoss":
            scores, labels = args[0], args[1].long()
            weight = args[2] if len(args) > 2 else None
            red = a.get("reduction", "mean")
            ign = a.get("ignore_index", None)
            loss = Fn.cross_entropy(scores, labels, weight=weight, reduction=red,
                                    ignore_index=-100 if ign is None else ign)
            if nout > 1:
                return [loss, torch.log_softmax(scores, dim=1)]
            return [loss]
        if op == "Constant":
            if "value" in a:
                return [a["value"]]
            if "value_float" in a:
                return [torch.tensor(a["value_float"], dtype=torch.float32)]
            if "value_floats" in a:
                return [torch.tensor(list(a["value_floats"]), dtype=torch.float32)]
            if "value_int" in a:
                return [torch.tensor(a["value_int"], dtype=torch.int64)]
            if "value_ints" in a:
                return [torch.tensor(list(a["value_ints"]), dtype=torch.int64)]
            raise NotImplementedError(f"Constant with {list(a)}")
        if op == "Gather":
            data, idx = args[0], args[1].long()
            ax = a.get("axis", 0)
            ax = ax + data.dim() if ax < 0 else ax
            idx = torch.where(idx < 0, idx + data.shape[ax], idx)
            out = torch.index_select(data, ax, idx.reshape(-1))
            return [out.reshape(tuple(data.shape[:ax]) + tuple(idx.shape)
                                + tuple(data.shape[ax + 1:]))]
        if op == "LayerNormalization":
            x, scale = args[0], args[1]
            bias = args[2] if len(args) > 2 else None
            ax = a.get("axis", -1)
            ax = ax + x.dim() if ax < 0 else ax
            eps = a.get("epsilon", 1e-5)
            dims = tuple(range(ax, x.dim()))
            mean = x.mean(dim=dims, keepdim=True)
            var = ((x - mean) ** 2).mean(dim=dims, keepdim=True)
            inv = torch.rsqrt(var + eps)
            y = (x - mean) * inv * scale
            if bias is not None:
                y = y + bias
            return [y, mean, inv][:nout]
        if op == "Transpose":
            x = args[0]
            perm = a.get("perm", list(reversed(range(x.dim()))))
            return [x.permute(*perm)]
        if op == "Split":
            x = args[0]
            ax = a.get("axis", 0)
            if len(args) > 1 and args[1] is not None:
                sizes = [int(v) for v in args[1].tolist()]
            elif "split" in a:
                sizes = list(a["split"])
            else:
                n = a.get("num_outputs", nout)
                chunk = -(-x.shape[ax] // n)
                sizes = [min(chunk, x.shape[ax] - i * chunk) for i in range(n)]
            return list(torch.split(x, sizes, dim=ax))
        if op == "Unsqueeze":
            x = args[0]
            axes = ([int(v) for v in args[1].tolist()] if len(args) > 1
                    else list(a["axes"]))
            rank = x.dim() + len(axes)
            for ax in sorted(v + rank if v < 0 else v for v in axes):
                x = x.unsqueeze(ax)
            return [x]
        if op == "Squeeze":
            x = args[0]
            axes = ([int(v) for v in args[1].tolist()] if len(args) > 1
                    else list(a.get("axes", [])))
            if not axes:
                return [x.squeeze()]
            for ax in sorted((v + x.dim() if v < 0 else v for v in axes), reverse=True):
                x = x.squeeze(ax)
            return [x]
        if op == "Concat":
            return [torch.cat(args, dim=a["axis"])]
        if op == "Reshape":
            return [self._reshape(args[0], args[1], a.get("allowzero", 0))]
        if op == "Cast":
            return [args[0].to(DTYPES[a["to"]])]
        if op == "Where":
            return [torch.where(args[0].bool(), args[1], args[2])]
        if op == "Softmax":
            x = args[0]
            if self.opset >= 13:
                return [torch.softmax(x, dim=a.get("axis", -1))]
            ax = a.get("axis", 1)
            ax = ax + x.dim() if ax < 0 else ax
            shape = x.shape
            return [torch.softmax(x.reshape(int(np.prod(shape[:ax])), -1), 1).reshape(shape)]
        if op == "Shape":
            return [torch.tensor(list(args[0].shape), dtype=torch.int64)]
        if op == "Expand":
            x = args[0]
            shape = [int(v) for v in args[1].tolist()]
            # torch's zero initial state of an LSTM, (layers, batch,
            # hidden): a slice of a constant of the export batch, expanded
            # to a shape of that batch or of the rows evaluated: both the
            # rows evaluated.
            if (self.export_batch and self.rows is not None and self.rows != self.export_batch
                    and x.dim() == len(shape)):
                for k in range(x.dim()):
                    if (x.shape[k] == self.export_batch
                            and shape[k] in (self.export_batch, self.rows)):
                        x = x.narrow(k, 0, self.rows)
                        shape[k] = self.rows
                        break
            return [x.expand(torch.broadcast_shapes(x.shape, tuple(shape)))]
        if op == "Slice":
            x = args[0]
            starts, ends = [int(v) for v in args[1].tolist()], [int(v) for v in args[2].tolist()]
            axes = ([int(v) for v in args[3].tolist()] if len(args) > 3 and args[3] is not None
                    else list(range(len(starts))))
            steps = ([int(v) for v in args[4].tolist()] if len(args) > 4 and args[4] is not None
                     else [1] * len(starts))
            index = [slice(None)] * x.dim()
            for st, en, ax, sp in zip(starts, ends, axes, steps):
                if sp != 1:
                    raise NotImplementedError("Slice with steps other than 1")
                ax = ax + x.dim() if ax < 0 else ax
                n = x.shape[ax]
                st = max(0, min(n, st + n if st < 0 else st))
                en = max(0, min(n, en + n if en < 0 else en))
                index[ax] = slice(st, en)
            return [x[tuple(index)]]
        if op == "LSTM":
            return self._lstm(args, a, nout)
        raise NotImplementedError(f"ONNX op {op} (node {node['name']})")

    def _lstm(self, args, a, nout):
        """ONNX LSTM, layout 0, default activations, full-length sequences:
        gates i, o, f, c; Y (T, D, B, H), Y_h, Y_c (D, B, H)."""
        args = list(args) + [None] * (8 - len(args))
        x, w, r, b, lens, h0, c0, peep = args[:8]
        if lens is not None and bool((lens != x.shape[0]).any()):
            raise NotImplementedError("LSTM with sequence_lens shorter than seq_length")
        if peep is not None or a.get("layout", 0) != 0 or "activations" in a or "clip" in a:
            raise NotImplementedError("LSTM beyond layout 0 and the default activations")
        T, B = x.shape[0], x.shape[1]
        D, H = w.shape[0], r.shape[2]
        reverse = {"forward": [False], "reverse": [True],
                   "bidirectional": [False, True]}[a.get("direction", "forward")]
        ys, hs, cs = [], [], []
        for d, rev in enumerate(reverse):
            h = h0[d] if h0 is not None else x.new_zeros(B, H)
            c = c0[d] if c0 is not None else x.new_zeros(B, H)
            bias = b[d, :4 * H] + b[d, 4 * H:] if b is not None else 0
            out = [None] * T
            for t in (reversed(range(T)) if rev else range(T)):
                g = x[t] @ w[d].t() + h @ r[d].t() + bias
                i, o = torch.sigmoid(g[:, :H]), torch.sigmoid(g[:, H:2 * H])
                f, cc = torch.sigmoid(g[:, 2 * H:3 * H]), torch.tanh(g[:, 3 * H:])
                c = f * c + i * cc
                h = o * torch.tanh(c)
                out[t] = h
            ys.append(torch.stack(out))
            hs.append(h)
            cs.append(c)
        return [torch.stack(ys, 1), torch.stack(hs), torch.stack(cs)][:nout]

    def eval_node(self, node, env):
        args = [env[n] if n else None for n in node["inputs"]]
        while args and args[-1] is None:
            args.pop()
        outs = self.run_node(node, args)
        for name, v in zip(node["outputs"], outs):
            if name:
                env[name] = v


class StagedGraph:
    """The graph split into stages: node_stages (node name -> stage) and
    param_stage (trainable initializer -> owning stage)."""

    def __init__(self, graph, node_stages, param_stage, p):
        self.g, self.p, self.param_stage = graph, p, dict(param_stage)
        self.const = {k: v for k, v in graph.initializers.items()
                      if k not in param_stage}
        producer = {}  # value name -> stage of the node producing it
        self.stage_nodes = [[] for _ in range(p)]
        for node in graph.nodes:
            ins = [n for n in node["inputs"] if n]
            if node["name"] in node_stages:
                s = node_stages[node["name"]]
            elif all(n in self.const for n in ins):
                graph.eval_node(node, self.const)  # shape arithmetic: a constant
                continue
            else:
                s = max([param_stage[n] for n in ins if n in param_stage]
                        + [producer[n] for n in ins if n in producer] + [0])
            if not 0 <= s < p:
                fail(f"node '{node['name']}' is on stage {s}, not in 0..{p - 1}")
            for n in ins:
                if n in producer and producer[n] > s:
                    fail(f"node '{node['name']}' (stage {s}) reads '{n}' from the "
                         f"later stage {producer[n]}")
            for n in node["outputs"]:
                if n:
                    producer[n] = s
            self.stage_nodes[s].append(node)
        self.producer = producer
        if graph.output not in producer:
            fail(f"the graph output '{graph.output}' is computed by no stage")
        # Per stage: the values it reads from elsewhere, the parameters it
        # reads, and its outputs (values other stages read, and the loss).
        self.ext_inputs, self.params_read, self.outputs = [], [], []
        for s in range(p):
            made = {n for node in self.stage_nodes[s] for n in node["outputs"] if n}
            ext, prm = [], []
            for node in self.stage_nodes[s]:
                for n in node["inputs"]:
                    if not n or n in made:
                        continue
                    if n in param_stage:
                        if n not in prm:
                            prm.append(n)
                    elif n not in ext:
                        ext.append(n)
            self.ext_inputs.append(ext)
            self.params_read.append(prm)
        for s in range(p):
            outs = []
            for t in range(p):
                if t == s:
                    continue
                for n in self.ext_inputs[t]:
                    if self.producer.get(n) == s and n not in outs:
                        outs.append(n)
            if self.producer[graph.output] == s and graph.output not in outs:
                outs.append(graph.output)
            self.outputs.append(outs)

    def forward(self, inputs, weights_of):
        """All values of a forward; a node reads parameter x at
        weights_of[stage owning x][x]. inputs: {graph input: tensor}."""
        self.g.rows = next(iter(inputs.values())).shape[0]
        env = dict(self.const)
        env.update(inputs)
        for s in range(self.p):
            for x in self.params_read[s]:
                env[x] = weights_of[self.param_stage[x]][x]
        with torch.no_grad():
            for s in range(self.p):
                for node in self.stage_nodes[s]:
                    self.g.eval_node(node, env)
        return env

    def backward(self, env, weights_of):
        """Stage-by-stage recompute backward from the forward's values env:
        stage s is re-run from its recorded inputs with weights_of[owner].
        Returns {parameter: gradient}."""
        self.g.rows = env[self.g.inputs[0]].shape[0] if self.g.inputs else None
        gacc = {self.g.output: torch.ones_like(env[self.g.output])}
        grads = {x: torch.zeros_like(weights_of[s][x])
                 for x, s in self.param_stage.items()}
        for s in reversed(range(self.p)):
            local = dict(self.const)
            leaves_in = []
            for n in self.ext_inputs[s]:
                v = env[n]
                if n in self.producer and v.is_floating_point():
                    v = v.detach().requires_grad_()
                    leaves_in.append(n)
                local[n] = v
            leaves_p = []
            for x in self.params_read[s]:
                local[x] = weights_of[self.param_stage[x]][x].detach().requires_grad_()
                leaves_p.append(x)
            outs = [n for n in self.outputs[s] if n in gacc]
            if not outs or not (leaves_in or leaves_p):
                continue
            with torch.enable_grad():
                for node in self.stage_nodes[s]:
                    self.g.eval_node(node, local)
                leaves = [local[n] for n in leaves_in] + [local[x] for x in leaves_p]
                # An output made of constants alone (an LSTM's zero initial
                # state, expanded) has no gradient to pass back.
                outs = [n for n in outs if local[n].requires_grad]
                if not outs:
                    continue
                gs = torch.autograd.grad([local[n] for n in outs], leaves,
                                         [gacc[n] for n in outs], allow_unused=True)
            for n, gv in zip(leaves_in + leaves_p, gs):
                if gv is None:
                    continue
                if n in self.param_stage:
                    grads[n] = grads[n] + gv
                else:
                    gacc[n] = gacc[n] + gv if n in gacc else gv
        return grads


def hand_partition(graph, p, params):
    """node_stages from p contiguous parts of the node list; each parameter
    on the stage of its first consumer (the self-test's partitions)."""
    n = len(graph.nodes)
    node_stages = {node["name"]: min(i * p // n, p - 1)
                   for i, node in enumerate(graph.nodes)}
    owner = {}
    for node in graph.nodes:
        for x in node["inputs"]:
            if x in params and x not in owner:
                owner[x] = node_stages[node["name"]]
    return node_stages, {x: owner[x] for x in params}


# --- the methods' formulas ----------------------------------------------------

def distances(method, p):
    """(forward d_s, backward d_s): how many updates ahead of the weights
    current at that moment each pass's weights are predicted (SpecTrain)."""
    if method == "spectrain":
        return [p - 1 - s for s in range(p)], [0] * p
    return [0] * p, [0] * p


def warmup_factor(tau, k, K):
    """PipeMare T1: stage lr = lr * factor at its update k."""
    if K <= 0 or tau < 1:
        return 1.0
    return float(tau) ** -(1.0 - min(k / K, 1.0))


def t2_update(delta, gamma, before, after):
    """PipeMare T2: delta <- gamma*delta + (1-gamma)*(W(k+1) - W(k))."""
    return gamma * delta + (1 - gamma) * (after - before)


def direction(opt_name, opt, params, last_grad):
    """SpecTrain's v: the optimizer's direction after its updates so far
    (zero before the first); weight decay never enters."""
    out = {}
    group = opt.param_groups[0]
    for name, w in params.items():
        st = opt.state.get(w, {})
        if not st:
            out[name] = torch.zeros_like(w)
        elif opt_name == "sgd":
            out[name] = last_grad[name].clone()
        elif opt_name in ("momentum", "nesterov"):
            out[name] = st["momentum_buffer"].clone()
        elif opt_name in ("adam", "adamw"):
            k = float(st["step"])
            b1, b2 = group["betas"]
            m_hat = st["exp_avg"] / (1 - b1 ** k)
            v_hat = st["exp_avg_sq"] / (1 - b2 ** k)
            out[name] = m_hat / (v_hat.sqrt() + group["eps"])
        else:
            fail(f"spectrain has no weight prediction for --optimizer {opt_name}")
    return out


def stage_simulate(sg, init, opt_name, lr, momentum, wd, method, arrays, steps,
                   batch, m, warmup=0, gamma=None):
    """Runs the simulation; returns (step losses, {parameter: final weight})."""
    if method == "spectrain" and opt_name == "adagrad":
        fail("spectrain: --optimizer adagrad has no weight prediction (refused)")
    p = sg.p
    tau = [p - 1 - s for s in range(p)]
    # The current weights W_s(u), one optimizer per stage.
    cur = [{x: init[x].detach().clone().float().requires_grad_()
            for x, s in sg.param_stage.items() if s == st} for st in range(p)]
    opts = [make_optimizer(opt_name, list(cur[s].values()), lr, momentum, wd)
            if cur[s] else None for s in range(p)]
    last_grad = [{x: torch.zeros_like(w) for x, w in cur[s].items()} for s in range(p)]
    # hist[s][k] = (W_s(k), v_s(k)) for k in u - tau_s .. u.
    def snapshot(s):
        v = (direction(opt_name, opts[s], cur[s], last_grad[s])
             if method == "spectrain" and opts[s] else None)
        return ({x: w.detach().clone() for x, w in cur[s].items()}, v)
    hist = [{0: snapshot(s)} for s in range(p)]
    delta = [{x: torch.zeros_like(w) for x, w in cur[s].items()} for s in range(p)]
    names = sg.g.inputs
    u, step_losses = 0, []
    for t in range(steps):
        losses = []
        for mb in step_microbatches(arrays, t, batch, m):
            fwd, bwd = [], []
            for s in range(p):
                k = max(u - tau[s], 0)
                W, v = hist[s][k]
                if method == "spectrain":
                    fwd.append({x: W[x] - tau[s] * lr * v[x] for x in W})
                    bwd.append(hist[s][u][0])
                elif method == "pipemare":
                    fwd.append(W)
                    if gamma is not None and tau[s] >= 1:
                        bwd.append({x: hist[s][u][0][x] - tau[s] * delta[s][x]
                                    for x in W})
                    else:
                        bwd.append(hist[s][u][0])
                else:  # pipedream
                    fwd.append(W)
                    bwd.append(W)
            env = sg.forward(dict(zip(names, mb)), fwd)
            losses.append(float(env[sg.g.output]))
            grads = sg.backward(env, bwd)
            for s in range(p):
                if not opts[s]:
                    hist[s][u + 1] = hist[s][u]
                    continue
                if method == "pipemare":
                    opts[s].param_groups[0]["lr"] = lr * warmup_factor(tau[s], u, warmup)
                before = hist[s][u][0]
                for x, w in cur[s].items():
                    w.grad = grads[x].clone()
                    last_grad[s][x] = grads[x].clone()
                opts[s].step()
                if method == "pipemare" and gamma is not None and tau[s] >= 1:
                    for x, w in cur[s].items():
                        delta[s][x] = t2_update(delta[s][x], gamma, before[x],
                                                w.detach())
                hist[s][u + 1] = snapshot(s)
            u += 1
            for s in range(p):
                for k in [k for k in hist[s] if k < u - tau[s]]:
                    del hist[s][k]
                assert len(hist[s]) <= tau[s] + 1
        step_losses.append(sum(losses) / len(losses))
    final = {x: w.detach().clone() for s in range(p) for x, w in cur[s].items()}
    return step_losses, final


# --- the check ------------------------------------------------------------------

def check(argv):
    ap = argparse.ArgumentParser()
    add_check_arguments(ap)
    ap.add_argument("--method", choices=["spectrain", "pipemare", "pipedream"],
                    required=True)
    ap.add_argument("--plan", required=True)
    ap.add_argument("--lr-warmup", type=int, default=0)
    ap.add_argument("--discrepancy-correction", type=float, default=None)
    a = ap.parse_args(argv)
    if a.lr_schedule != "constant" or a.warmup_steps:
        fail("a learning-rate schedule is not simulated here (async_reference.py "
             "and torch_trajectory.py simulate one)")
    if a.batch % a.microbatches:
        fail(f"--batch {a.batch} is not a multiple of --microbatches {a.microbatches}")
    if a.method != "pipemare" and (a.lr_warmup or a.discrepancy_correction is not None):
        fail("--lr-warmup and --discrepancy-correction apply to --method pipemare only")
    if a.lr_warmup < 0:
        fail(f"--lr-warmup {a.lr_warmup} is negative")
    gamma = a.discrepancy_correction
    if gamma is not None and not 0 <= gamma < 1:
        fail(f"--discrepancy-correction {gamma} is not in [0, 1)")
    if a.method == "spectrain" and a.optimizer == "adagrad":
        fail("spectrain: --optimizer adagrad has no weight prediction (refused)")

    graph = OnnxGraph(a.onnx)
    with open(a.plan) as f:
        plan = json.load(f)
    if "device_plans" in plan:
        listed = {x for d in plan["device_plans"] for x in d["parameters"]}
        names = [x for x in graph.initializers if x in listed]
        for x in listed - set(names):
            fail(f"{a.onnx} has no initializer '{x}' that {a.plan} lists")
    else:
        model, _ = load_initial(a.model, a.onnx)
        names = [x for x, _ in model.named_parameters()]
    param_stage, p = read_plan(a.plan, names)
    node_stages = plan.get("node_stages", {}) if p > 1 else {
        n["name"]: 0 for n in graph.nodes}
    sg = StagedGraph(graph, node_stages, param_stage, p)
    data = np.load(a.data)
    arrays = [data[n] for n in graph.inputs]
    logged = read_log(a.log, a.steps)
    ref, final = stage_simulate(sg, graph.initializers, a.optimizer, a.lr,
                                a.momentum, a.weight_decay, a.method, arrays,
                                a.steps, a.batch, a.microbatches,
                                warmup=a.lr_warmup, gamma=gamma)
    what = a.method
    if a.method == "pipemare":
        what += (f" (lr warm-up {a.lr_warmup})" if a.lr_warmup else "") + \
            (f" (discrepancy correction {gamma})" if gamma is not None else "")
    check_losses(logged, ref, a.rtol, what)
    if a.saved:
        check_saved(a.saved, final, a.rtol, what)


# --- self-test -------------------------------------------------------------------

def self_test():
    problems = []

    def report(label, ok, detail=""):
        print(f"self-test {label}: {'ok' if ok else 'FAIL'}"
              + (f" ({detail})" if detail else ""), flush=True)
        if not ok:
            problems.append(label)

    def rel(a, b):
        return float((a - b).abs().max()) / max(float(b.abs().max()), 1e-12)

    tmp = tempfile.mkdtemp(prefix="stage_reference_")
    export_batch, rows = 8, 4  # micro-batches smaller than the export batch
    built = {}
    for name in ("mlp", "cnn", "transformer"):
        path = os.path.join(tmp, f"{name}.onnx")
        models.export(name, path, export_batch, False)
        graph = OnnxGraph(path)
        model, input_names = load_initial(name, path)
        params = dict(model.named_parameters())
        _, make_inputs, _ = models.make(name)
        gen = torch.Generator().manual_seed(3)
        batch = make_inputs(rows, gen)
        # (1) interpreter (p = 2, recompute backward) == the torch model.
        node_stages, owner = hand_partition(graph, 2, list(params))
        sg = StagedGraph(graph, node_stages, owner, 2)
        weights = [{x: graph.initializers[x] for x in params if owner[x] == s}
                   for s in range(2)]
        env = sg.forward(dict(zip(graph.inputs, batch)), weights)
        grads = sg.backward(env, weights)
        model.zero_grad()
        loss = model(*batch)
        loss.backward()
        lerr = abs(float(env[graph.output]) - float(loss))
        gerr = max(rel(grads[x], w.grad) for x, w in params.items())
        report(f"(1) {name}: interpreted loss and stage gradients == torch model",
               lerr <= 1e-5 and gerr <= 1e-5,
               f"loss {lerr:.1e}, gradients {gerr:.1e}")
        built[name] = (path, graph, model, input_names)
    shutil.rmtree(tmp, ignore_errors=True)  # everything is loaded

    g = torch.Generator().manual_seed(7)
    nrows, batch, steps, lr = 40, 8, 5, 0.1  # 40 rows, 48 read: the data wraps
    mlp_arrays = [torch.randn(nrows, 32, generator=g).numpy(),
                  torch.randint(0, 10, (nrows,), generator=g).numpy()]
    tok = torch.randint(0, 32, (nrows, 9), generator=g)
    tr_arrays = [tok[:, :8].contiguous().numpy(), tok[:, 1:].contiguous().numpy()]

    # (2) --method pipedream == async_reference.simulate on the same partition.
    for name, arrays, p, opt in (("mlp", mlp_arrays, 2, "momentum"),
                                 ("mlp", mlp_arrays, 3, "adam"),
                                 ("transformer", tr_arrays, 2, "sgd"),
                                 ("transformer", tr_arrays, 3, "momentum")):
        path, graph, model0, _ = built[name]
        names = [x for x, _ in model0.named_parameters()]
        node_stages, owner = hand_partition(graph, p, names)
        sg = StagedGraph(graph, node_stages, owner, p)
        got_l, got_w = stage_simulate(sg, graph.initializers, opt, lr, 0.9, 0.0,
                                      "pipedream", arrays, steps, batch, 2)
        model = copy.deepcopy(model0)
        o = make_optimizer(opt, model.parameters(), lr)
        want_l = simulate(model, o, owner, p, "pipedream", False, arrays, steps,
                          batch, 2)
        err = max([abs(a - b) / abs(b) for a, b in zip(got_l, want_l)]
                  + [rel(got_w[x], w.detach()) for x, w in model.named_parameters()])
        report(f"(2) pipedream {name} p={p} {opt} == async_reference.simulate",
               err <= 1e-6, f"worst {err:.1e}")

    # (3) one stage (tau = 0): spectrain and pipemare are per-micro-batch
    # training; pipemare with every parameter on the last stage too.
    path, graph, model0, _ = built["mlp"]
    names = [x for x, _ in model0.named_parameters()]

    def plain(opt, m):
        model = copy.deepcopy(model0)
        o = make_optimizer(opt, model.parameters(), lr)
        losses = []
        for t in range(steps):
            ls = []
            for mb in step_microbatches(mlp_arrays, t, batch, m):
                o.zero_grad()
                loss = model(*mb)
                loss.backward()
                o.step()
                ls.append(float(loss))
            losses.append(sum(ls) / len(ls))
        return losses, {x: w.detach() for x, w in model.named_parameters()}

    def compare(label, got, want, tol=1e-6):
        err = max([abs(a - b) / abs(b) for a, b in zip(got[0], want[0])]
                  + [rel(got[1][x], want[1][x]) for x in names])
        report(label, len(got[0]) == len(want[0]) and err <= tol, f"worst {err:.1e}")

    one = StagedGraph(graph, {n["name"]: 0 for n in graph.nodes},
                      {x: 0 for x in names}, 1)
    for opt in ("sgd", "adam"):
        want = plain(opt, 2)
        compare(f"(3) spectrain p=1 {opt} == per-micro-batch training",
                stage_simulate(one, graph.initializers, opt, lr, 0.9, 0.0,
                               "spectrain", mlp_arrays, steps, batch, 2), want)
        compare(f"(3) pipemare p=1 {opt} (T1, T2) == per-micro-batch training",
                stage_simulate(one, graph.initializers, opt, lr, 0.9, 0.0,
                               "pipemare", mlp_arrays, steps, batch, 2,
                               warmup=3, gamma=0.5), want)
    node_stages, _ = hand_partition(graph, 3, names)
    last = StagedGraph(graph, node_stages, {x: 2 for x in names}, 3)
    compare("(3) pipemare p=3, all weights on the last stage == per-micro-batch SGD",
            stage_simulate(last, graph.initializers, "sgd", lr, 0.9, 0.0,
                           "pipemare", mlp_arrays, steps, batch, 2,
                           warmup=3, gamma=0.5), plain("sgd", 2))

    # (4) formulas.
    fwd, bwd = distances("spectrain", 4)
    report("(4) spectrain d table (forward p-1-s, backward 0), p=4",
           fwd == [3, 2, 1, 0] and bwd == [0, 0, 0, 0], f"{fwd} {bwd}")
    # Plain SGD, a linear loss <c, w> (constant gradient c): the prediction
    # W(k) - tau*lr*v(k) is the weight reached tau updates later.
    c = torch.tensor([0.5, -1.0, 2.0])
    w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    o = make_optimizer("sgd", [w], lr)
    traj, preds, last_g = [w.detach().clone()], [], {"w": torch.zeros(3)}
    for k in range(6):
        preds.append({tau: traj[k] - tau * lr * direction("sgd", o, {"w": w}, last_g)["w"]
                      for tau in (1, 2, 3)})
        w.grad = c.clone()
        last_g["w"] = c.clone()
        o.step()
        traj.append(w.detach().clone())
    err = max(float((preds[k][tau] - traj[k + tau]).abs().max())
              for k in range(1, 4) for tau in (1, 2, 3))
    report("(4) spectrain sgd, constant gradient: prediction == W(k + tau)",
           err <= 1e-6, f"worst {err:.1e}")
    K = 8
    f = [warmup_factor(4, k, K) for k in range(K + 3)]
    loglin = max(abs(math.log(f[k]) - (-(1 - k / K) * math.log(4))) for k in range(K + 1))
    report("(4) pipemare T1: lr/tau at k=0, lr for k>=K, log-linear between",
           abs(f[0] - 0.25) < 1e-12 and all(v == 1.0 for v in f[K:])
           and loglin < 1e-12 and warmup_factor(0, 0, K) == 1.0
           and warmup_factor(3, 0, 0) == 1.0)
    gamma, cstep, d, err = 0.7, torch.tensor([0.3, -0.2]), torch.zeros(2), 0.0
    w = torch.tensor([1.0, -1.0])
    for n in range(1, 8):
        d = t2_update(d, gamma, w, w + cstep)
        w = w + cstep
        err = max(err, float((d - (1 - gamma ** n) * cstep).abs().max()))
    report("(4) pipemare T2: delta after n constant updates c == (1-gamma^n) c",
           err <= 1e-7, f"worst {err:.1e}")
    # (5) the mlp as p = 3 one-layer stages (fc1+Relu | fc2+Tanh | fc3+loss),
    # SpecTrain and PipeMare (T1, T2) written out by hand: explicit momentum
    # (v = mu v + g, W -= lr v), explicit version lists, the recompute
    # backward as three torch.autograd.grad calls.
    node_stages, owner = hand_partition(graph, 3, names)
    staged = StagedGraph(graph, node_stages, owner, 3)
    for method, opt, warmup, gam in (("spectrain", "momentum", 0, None),
                                     ("spectrain", "sgd", 0, None),
                                     ("pipemare", "momentum", 3, 0.5)):
        got = stage_simulate(staged, graph.initializers, opt, lr, 0.9, 0.0, method,
                             mlp_arrays, steps, batch, 2, warmup=warmup, gamma=gam)
        want = hand_three_stage(model0, method, opt, lr, 0.9, warmup, gam,
                                [mb for t in range(steps) for mb in
                                 step_microbatches(mlp_arrays, t, batch, 2)], 2)
        compare(f"(5) {method} {opt} p=3"
                + (f" T1 K={warmup} T2 gamma={gam}" if gam is not None else "")
                + " == hand-written three-stage loop", got, want, 1e-5)
    if problems:
        fail(f"self-test: {len(problems)} checks failed")
    print("self-test: OK")


def hand_three_stage(model, method, opt, lr, mu, warmup, gamma, units, m):
    """SpecTrain / PipeMare for the mlp cut into fc1+Relu | fc2+Tanh |
    fc3+cross-entropy, without the interpreter or torch.optim."""
    fns = [lambda h, W: torch.relu(h @ W[0].t() + W[1]),
           lambda h, W: torch.tanh(h @ W[0].t() + W[1]),
           lambda h, W, y: Fn.cross_entropy(h @ W[0].t() + W[1], y)]
    keys = [("fc1.weight", "fc1.bias"), ("fc2.weight", "fc2.bias"),
            ("fc3.weight", "fc3.bias")]
    prm = dict(model.named_parameters())
    Ws = [[[prm[k].detach().clone() for k in ks]] for ks in keys]  # all versions
    Vs = [[[torch.zeros_like(w) for w in Ws[s][0]]] for s in range(3)]
    delta = [[torch.zeros_like(w) for w in Ws[s][0]] for s in range(3)]
    losses = []
    for u, (x, y) in enumerate(units):
        F, Bw = [], []
        for s in range(3):
            tau, k = 2 - s, max(u - (2 - s), 0)
            if method == "spectrain":
                F.append([w - tau * lr * v for w, v in zip(Ws[s][k], Vs[s][k])])
                Bw.append(Ws[s][u])
            else:
                F.append(Ws[s][k])
                Bw.append([w - tau * d for w, d in zip(Ws[s][u], delta[s])]
                          if gamma is not None else Ws[s][u])
        with torch.no_grad():
            a1 = fns[0](x, F[0])
            a2 = fns[1](a1, F[1])
            losses.append(float(fns[2](a2, F[2], y)))
        acts, g_out, grads = [x, a1, a2], None, [None] * 3
        for s in (2, 1, 0):
            inp = acts[s].detach().requires_grad_(s > 0)
            leaves = [w.detach().requires_grad_() for w in Bw[s]]
            out = fns[s](inp, leaves, y) if s == 2 else fns[s](inp, leaves)
            wrt = ([inp] if s > 0 else []) + leaves
            gs = torch.autograd.grad(out, wrt, g_out)
            if s > 0:
                g_out, gs = gs[0], gs[1:]
            grads[s] = gs
        for s in range(3):
            tau = 2 - s
            f = (tau ** -(1 - min(u / warmup, 1)) if method == "pipemare"
                 and warmup and tau >= 1 else 1.0)
            if opt == "sgd":
                v = [g.clone() for g in grads[s]]
            else:
                v = [mu * vo + g if u > 0 else g.clone()
                     for vo, g in zip(Vs[s][-1], grads[s])]
            new = [w - lr * f * vi for w, vi in zip(Ws[s][u], v)]
            if method == "pipemare" and gamma is not None and tau >= 1:
                delta[s] = [gamma * d + (1 - gamma) * (n - w)
                            for d, n, w in zip(delta[s], new, Ws[s][u])]
            Ws[s].append(new)
            Vs[s].append(v)
    weights = {k: Ws[s][-1][i] for s, ks in enumerate(keys) for i, k in enumerate(ks)}
    return [sum(losses[i:i + m]) / m for i in range(0, len(losses), m)], weights


def main():
    return run_checks(check, self_test)


if __name__ == "__main__":
    main()
