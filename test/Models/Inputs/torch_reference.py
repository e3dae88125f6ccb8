#!/usr/bin/env python3
"""BatchNormalization in training: conv nets, and PyTorch's trajectory.

    torch_reference.py make OUT [--model NAME]   writes OUT/NAME.onnx, .npz
    torch_reference.py check [--model NAME] --onnx M.onnx --data D.npz
        --log L.jsonl --saved trained.onnx --steps K --batch B
        --microbatches M [--lr F] [--momentum F] [--rtol R]

Models: `gn` (GroupNorm and InstanceNorm2d), `bn` (default; Conv-BN-ReLU-Conv(stride 2)-BN-ReLU-GlobalAveragePool-
Linear, 6x6 images, batch 8) and torchvision's `resnet18`, `mobilenet_v2`,
`densenet121` (10 classes, 64x64 images, batch 8), each with
a cross-entropy loss, exported by torch.onnx in training mode (opset 17) with
the initial running statistics kept, so each BatchNormalization normalises
with batch statistics and returns running statistics.

`check` trains the same module in PyTorch from the ONNX model's initializers
(SGD with momentum, rows s*B .. s*B+B-1 at step s) the way pipec defines
micro-batching (README, "BatchNormalization"): each of the M micro-batches
of B/M rows is normalised with its own statistics, the step's gradient is
the mean of the micro-batches' (gradient accumulation), and the running
statistics are updated once per micro-batch, in order. Running statistics
follow the ONNX operator: running = momentum * running + (1 - momentum) *
batch statistic, with the biased batch variance (PyTorch's own buffers use
the unbiased one, so they are recomputed here from each BatchNorm's input).
The reference runs in float64. It compares every step's loss with the log, and the trained weights and the
running statistics with the ONNX written by `pipe-run --save`:
max|ours - torch| <= rtol * max|torch| per tensor. Exits 1 on a mismatch. With --float32-slack it also trains in float32 and
allows a tensor (or loss) up to 4x PyTorch's own float32 error where that is
larger than rtol: after a few ResNet-18 steps PyTorch's float32 gradients of
the deep layers differ from float64 by up to 3e-2 (BatchNorm over few values
per channel), and so do any float32 implementation's. Run with Debian's /usr/bin/python3 (torch, torchvision, onnx).
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
from torch import nn

TOOLS_INPUTS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            "..", "..", "Tools", "Inputs")
sys.path.insert(0, TOOLS_INPUTS)
from reference_common import onnx_initializers  # noqa: E402


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.bn2 = nn.BatchNorm2d(8)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x, y):
        h = torch.relu(self.bn1(self.conv1(x)))
        h = torch.relu(self.bn2(self.conv2(h)))
        return nn.functional.cross_entropy(self.fc(self.pool(h).flatten(1)), y)


class GNNet(nn.Module):
    """Conv-GroupNorm-ReLU-Conv-InstanceNorm(affine)-ReLU-mean-Linear: torch
    exports GroupNorm as Reshape + InstanceNormalization + the affine."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.gn = nn.GroupNorm(2, 8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.inorm = nn.InstanceNorm2d(8, affine=True)
        self.fc = nn.Linear(8, 5)
        with torch.no_grad():
            for norm in (self.gn, self.inorm):
                norm.weight.uniform_(0.5, 1.5)
                norm.bias.uniform_(-0.2, 0.2)

    def forward(self, x, y):
        h = torch.relu(self.gn(self.conv1(x)))
        h = torch.relu(self.inorm(self.conv2(h)))
        return nn.functional.cross_entropy(self.fc(h.mean((2, 3))), y)


class Vision(nn.Module):
    """A torchvision classifier with a cross-entropy loss."""

    def __init__(self, name):
        super().__init__()
        import torchvision
        # GoogLeNet's auxiliary classifiers return a tuple in training mode.
        extra = {"aux_logits": False, "init_weights": True} if name == "googlenet" else {}
        self.net = getattr(torchvision.models, name)(num_classes=10, **extra)
        # Dropout (MobileNetV2's classifier) and stochastic depth
        # (EfficientNet's and ConvNeXt's residual branches) off: random
        # masks cannot match.
        from torchvision.ops import StochasticDepth
        for m in self.net.modules():
            if isinstance(m, (nn.Dropout, StochasticDepth)):
                m.p = 0.0

    def forward(self, x, y):
        return nn.functional.cross_entropy(self.net(x), y)


class Attention(nn.Module):
    """test/Tools/Inputs/attention_models.py's encoders and ViT."""

    def __init__(self, name):
        super().__init__()
        import attention_models as am
        self.am = am
        self.net = {"encoder": lambda: am.Encoder(False),
                    "encoder_bf": lambda: am.Encoder(True),
                    "encoder_causal": lambda: am.Encoder(False, causal=True),
                    "encoder_finite": lambda: am.Encoder(False, causal="finite"),
                    "encoder_bool": lambda: am.Encoder(False, causal="bool"),
                    "seq2seq": am.Seq2Seq,
                    "vit": am.ViT,
                    "llama": am.Llama,
                    "llama_hf": lambda: am.Llama(repeat="expand"),
                    "padded_encoder": am.PaddedEncoder,
                    "padded_causal": lambda: am.PaddedEncoder(causal=True),
                    "padded_bool": lambda: am.PaddedEncoder(causal="bool"),
                    "padded_manual": am.PaddedManual,
                    "bert_manual": lambda: am.PaddedManual("bert"),
                    "alibi_manual": lambda: am.PaddedManual("alibi"),
                    "learned_manual": lambda: am.PaddedManual("learned")}[name]()

    def forward(self, *inputs):
        return self.net(*inputs)


class Seq2Seq(nn.Module):
    """A GNMT-like encoder-decoder, small: source embedding, a 2-layer LSTM
    encoder whose final states start a 2-layer LSTM decoder (teacher
    forcing: the decoder reads the target shifted by one), a linear layer
    over the target vocabulary and a cross-entropy over every position."""

    V, T, D = 13, 5, 16

    def __init__(self):
        super().__init__()
        self.src_emb = nn.Embedding(self.V, self.D)
        self.tgt_emb = nn.Embedding(self.V, self.D)
        self.encoder = nn.LSTM(self.D, self.D, num_layers=2)
        self.decoder = nn.LSTM(self.D, self.D, num_layers=2)
        self.out = nn.Linear(self.D, self.V)

    def forward(self, src, tgt_in, tgt_out):
        _, state = self.encoder(self.src_emb(src).transpose(0, 1))
        y, _ = self.decoder(self.tgt_emb(tgt_in).transpose(0, 1), state)
        logits = self.out(y.transpose(0, 1))
        return nn.functional.cross_entropy(logits.reshape(-1, self.V),
                                           tgt_out.reshape(-1))


class IndexPut(nn.Module):
    """In-place indexed assignment, which PyTorch exports as ScatterND:
    rows of a trained table replaced by trained rows (t[[1, 3]] = fill), a
    column of every sample's activations overwritten (h[:, 2] = 2 h[:, 0],
    the tuples (b, 2) for each sample b), then an indexed read. With
    `rows`, only samples 0 and 1 are overwritten (h[[0, 1], 2] = ...): that
    cannot be split into micro-batches."""

    def __init__(self, rows=False):
        super().__init__()
        self.rows = rows
        self.lin = nn.Linear(6, 8)
        self.table = nn.Parameter(torch.randn(5, 8))
        self.fill = nn.Parameter(torch.randn(2, 8))
        self.out = nn.Linear(8, 5)

    def forward(self, x, y):
        t = self.table.clone()
        t[torch.tensor([1, 3])] = self.fill
        h = torch.tanh(self.lin(x)).unsqueeze(1) + t
        h2 = h.clone()
        if self.rows:
            h2[torch.tensor([0, 1]), 2] = self.fill * 2
        else:
            h2[:, 2] = h[:, 0] * 2
        g = h2[:, torch.tensor([0, 2, 4, 4])]
        return nn.functional.cross_entropy(self.out(g.mean(1)), y)


class GatherScatter(nn.Module):
    """torch.gather and Tensor.scatter, exported as GatherElements and
    ScatterElements: the label's logit picked per sample, a smoothed one-hot
    target scattered into zeros, and rows of a trained table gathered per
    sample (indices along the gathered axis)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 5)
        self.table = nn.Parameter(torch.randn(7, 5))

    def forward(self, x, y):
        logits = self.lin(x)
        picked = logits.gather(1, y[:, None])
        onehot = torch.zeros_like(logits).scatter(1, y[:, None], 1.0)
        target = 0.9 * onehot + 0.02
        smooth = -(target * torch.log_softmax(logits, 1)).sum(1).mean()
        rows = self.table.gather(0, (y[:, None] + torch.arange(5)[None]) % 7)
        return smooth - 0.1 * picked.mean() + (rows * torch.tanh(logits)).mean()


def build(name):
    """(module, batch, {input name: (shape per sample, dtype, classes or None)})"""
    if name == "bn":
        return Net(), 8, {"x": ((3, 6, 6), np.float32, None), "y": ((), np.int64, 5)}
    if name == "gn":
        return GNNet(), 8, {"x": ((3, 6, 6), np.float32, None), "y": ((), np.int64, 5)}
    if name == "gatherscatter":
        return GatherScatter(), 8, {"x": ((6,), np.float32, None), "y": ((), np.int64, 5)}
    if name in ("indexput", "indexput_rows"):
        return IndexPut(name == "indexput_rows"), 8, {"x": ((6,), np.float32, None), "y": ((), np.int64, 5)}
    if name in ("encoder", "encoder_bf", "encoder_causal", "encoder_finite", "encoder_bool",
                "seq2seq", "llama", "llama_hf",
                "alibi_manual", "learned_manual"):
        m = Attention(name)
        t, v = m.am.T, m.am.V
        return m, 8, {"tok": ((t,), np.int64, v), "tgt": ((t,), np.int64, v)}
    if name in ("padded_encoder", "padded_causal", "padded_bool", "padded_manual", "bert_manual"):
        # keep: 1 for a token, 0 for padding (make() keeps the first).
        m = Attention(name)
        t, v = m.am.T, m.am.V
        return m, 8, {"tok": ((t,), np.int64, v), "keep": ((t,), np.int64, 2),
                      "tgt": ((t,), np.int64, v)}
    if name == "gnmt":
        t, v = Seq2Seq.T, Seq2Seq.V
        return Seq2Seq(), 8, {"src": ((t,), np.int64, v), "tgt_in": ((t,), np.int64, v),
                              "tgt_out": ((t,), np.int64, v)}
    if name == "vit":
        m = Attention(name)
        return m, 8, {"x": ((3, 8, 8), np.float32, None), "y": ((), np.int64, m.am.V)}
    return Vision(name), 8, {"x": ((3, 64, 64), np.float32, None), "y": ((), np.int64, 10)}


def make(out, name):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model, batch, inputs = build(name)
    with torch.no_grad():  # running statistics away from their defaults
        for bn in model.modules():
            if isinstance(bn, nn.BatchNorm2d):
                bn.running_mean.uniform_(-0.5, 0.5)
                bn.running_var.uniform_(0.5, 2.0)
                bn.weight.uniform_(0.5, 1.5)
                bn.bias.uniform_(-0.2, 0.2)
    example = tuple(torch.randn(batch, *shape) if classes is None
                    else torch.randint(0, classes, (batch, *shape))
                    for shape, _, classes in inputs.values())
    state = {k: v.clone() for k, v in model.state_dict().items()}
    path = os.path.join(out, name + ".onnx")
    torch.onnx.export(model, example, path,
                      input_names=list(inputs), output_names=["loss"],
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, opset_version=17)
    # Tracing ran the forward in training mode: keep the initial buffers.
    import onnx
    from onnx import numpy_helper
    m = onnx.load(path)
    for init in m.graph.initializer:
        if init.name in state:
            init.CopyFrom(numpy_helper.from_array(state[init.name].numpy(),
                                                  init.name))
    onnx.save(m, path)
    rng = np.random.default_rng(1)
    rows = 8 * batch
    data = {}
    for n, (shape, dtype, classes) in inputs.items():
        data[n] = ((rng.standard_normal((rows, *shape)) * 2 + 0.5).astype(dtype)
                   if classes is None else rng.integers(0, classes, (rows, *shape)).astype(dtype))
    if "keep" in data:
        # A key padding mask: every sequence keeps its first token (a row
        # with every key padded is NaN, in PyTorch as here).
        data["keep"][:, 0] = 1
    np.savez(os.path.join(out, name + ".npz"), **data)
    print(f"wrote {name}.onnx and {name}.npz")


def rel_err(got, ref):
    return float(np.max(np.abs(got - ref))) / max(float(np.max(np.abs(ref))), 1e-12)


def check(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="bn")
    ap.add_argument("--onnx", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--saved", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--microbatches", type=int, default=1)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--weights-rtol", type=float,
                    help="the tolerance of the saved tensors (default: --rtol)")
    ap.add_argument("--float32-slack", action="store_true",
                    help="also train in float32; a tensor (or loss) may differ "
                         "from float64 by up to 4x PyTorch's own float32 error")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    inits = onnx_initializers(a.onnx)
    data = np.load(a.data)
    with open(a.log) as f:
        logged = [json.loads(line) for line in f if line.strip()]
    if len(logged) != a.steps:
        sys.exit(f"FAIL: the log has {len(logged)} steps, expected {a.steps}")
    if a.batch % a.microbatches:
        sys.exit("FAIL: the batch is not divisible by the micro-batches")

    ref_losses, refs = train(a, inits, data, torch.float64)
    loss_tol = [a.rtol] * a.steps
    wtol = a.weights_rtol if a.weights_rtol is not None else a.rtol
    tol = {key: wtol for key in refs}
    if a.float32_slack:
        losses32, refs32 = train(a, inits, data, torch.float32)
        for s in range(a.steps):
            err = abs(losses32[s] - ref_losses[s]) / max(abs(ref_losses[s]), 1e-12)
            loss_tol[s] = max(a.rtol, 4 * err)
        for key in refs:
            tol[key] = max(wtol, 4 * rel_err(refs32[key], refs[key]))

    worst = 0.0
    for s in range(a.steps):
        got, ref = logged[s]["loss"], ref_losses[s]
        rel = abs(got - ref) / max(abs(ref), 1e-12)
        worst = max(worst, rel / loss_tol[s] * a.rtol)
        if rel > loss_tol[s]:
            sys.exit(f"FAIL: step {s}: loss {got} vs PyTorch {ref} "
                     f"(relative error {rel:.2e} > {loss_tol[s]:.2e})")
    print(f"OK: {a.steps} steps within {a.rtol} of PyTorch "
          f"(worst relative error {worst:.1e}"
          f"{', scaled by the float32 slack' if a.float32_slack else ''})")

    saved = onnx_initializers(a.saved)
    worst, slack = 0.0, 0
    for key, ref in refs.items():
        if key not in saved:
            sys.exit(f"FAIL: {a.saved} has no initializer '{key}'")
        err = rel_err(saved[key].astype(np.float64), ref)
        worst = max(worst, err / tol[key] * wtol)
        slack += tol[key] > wtol
        if err > tol[key]:
            sys.exit(f"FAIL: saved '{key}' differs from the reference by "
                     f"{err:.2e} (relative to its largest element; "
                     f"tolerance {tol[key]:.2e})")
    print(f"OK: {len(refs)} saved weights and running statistics within "
          f"{wtol} of the reference (worst {worst:.1e}" +
          (f"; {slack} with PyTorch's float32 error as slack)"
           if a.float32_slack else ")"))


def train(a, inits, data, dtype):
    """The steps' losses and the trained weights and running statistics of
    PyTorch in `dtype` (float64: BatchNorm over few values per channel is
    ill-conditioned, and PyTorch's float32 drifts from the exact result by
    more than the tolerance within a few ResNet steps)."""
    model = build(a.model)[0]
    # Each tensor once: a tied weight (the Llama head's) under its first
    # name, as the export names its one initializer.
    named = dict(model.named_parameters())
    named.update(dict(model.named_buffers()))
    with torch.no_grad():
        for key, tensor in named.items():
            if key.endswith("num_batches_tracked"):
                continue  # not exported; unused with a fixed momentum
            if key not in inits:
                sys.exit(f"FAIL: {a.onnx} has no initializer '{key}'")
            tensor.copy_(torch.from_numpy(inits[key].copy()))
    model = model.to(dtype)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)

    # Running statistics with the ONNX operator's semantics, from each
    # BatchNorm's input.
    bns = {name: m for name, m in model.named_modules()
           if isinstance(m, nn.BatchNorm2d)}
    running = {name: [inits[f"{name}.running_mean"].astype(np.float64),
                      inits[f"{name}.running_var"].astype(np.float64)]
               for name in bns}

    def hook(name):
        def f(module, inputs):
            x = inputs[0].detach().double().numpy()
            axes = (0, 2, 3)
            m = 1.0 - module.momentum  # ONNX momentum = 1 - torch's
            running[name][0] = m * running[name][0] + (1 - m) * x.mean(axis=axes)
            running[name][1] = m * running[name][1] + (1 - m) * x.var(axis=axes)
        return f
    for name, bn in bns.items():
        bn.register_forward_pre_hook(hook(name))

    arrays = [data[n] for n in build(a.model)[2]]
    rows = arrays[0].shape[0]
    mb = a.batch // a.microbatches
    losses = []
    for s in range(a.steps):
        idx = [(s * a.batch + i) % rows for i in range(a.batch)]
        step = [torch.from_numpy(x[idx]) for x in arrays]
        step = [t.to(dtype) if t.is_floating_point() else t for t in step]
        opt.zero_grad()
        total = 0.0
        for k in range(a.microbatches):
            part = slice(k * mb, (k + 1) * mb)
            loss = model(*[t[part] for t in step]) / a.microbatches
            loss.backward()
            total += float(loss)
        opt.step()
        losses.append(total)
    refs = {k: p.detach().double().numpy() for k, p in model.named_parameters()}
    for name in bns:
        refs[f"{name}.running_mean"] = running[name][0]
        refs[f"{name}.running_var"] = running[name][1]
    return losses, refs


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "make":
        name = sys.argv[4] if len(sys.argv) >= 5 and sys.argv[3] == "--model" else "bn"
        make(sys.argv[2], name)
    elif len(sys.argv) >= 2 and sys.argv[1] == "check":
        check(sys.argv[2:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
