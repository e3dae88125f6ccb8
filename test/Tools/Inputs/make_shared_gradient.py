"""A model whose gradient across a cut is a contribution to two values:
a = x * w1 and b = x * w2 cross the cut; after it, t = a + b feeds
y = t @ aᵀ, and b also feeds z = b * w3. The gradient of t (built by the
MatMul's VJP, which reads aᵀ) is passed by the Add to both a and b, so it
is the gradient of neither alone: a contribution to each, which
pipe-split-stages sends once for each (and must not treat as b's because
its builder reads a).

    make_shared_gradient.py OUT.onnx [DATA.npz]

DATA.npz: 16 samples of x for pipe-run.
"""
import sys

import numpy as np
import torch


class Shared(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = torch.nn.Parameter(torch.randn(4, 4) * 0.5)
        self.w2 = torch.nn.Parameter(torch.randn(4, 4) * 0.5)
        self.w3 = torch.nn.Parameter(torch.randn(4, 4) * 0.5)

    def forward(self, x):
        a = x * self.w1
        b = x * self.w2
        t = a + b
        y = torch.matmul(t, a.transpose(1, 2))
        z = b * self.w3
        return (y.sum(dim=(1, 2)) + z.sum(dim=(1, 2))).pow(2).mean()


torch.manual_seed(0)
torch.onnx.export(Shared(), (torch.randn(2, 4, 4),), sys.argv[1], input_names=["x"],
                  output_names=["loss"], opset_version=17,
                  dynamic_axes={"x": {0: "batch"}})
if len(sys.argv) > 2:
    np.random.seed(0)
    np.savez(sys.argv[2], x=np.random.randn(16, 4, 4).astype(np.float32))
