"""A residual block with BatchNorm before the cut, for a cut right before
the residual Add: h = relu(bn(fc1 x)) and b = fc2 h cross the cut, t = h + b
after it, so the gradient of t is the contribution to both h and b; head2
also reads h after the cut (another contribution to h from stage 1, added
to h's message only). Under --batchnorm full-batch stage 0 (its
BatchNormalization sees all micro-batches) reads both gradients through
one micro-batch concat marker, which pipe-split-stages splits too.

    make_residual_bn.py OUT.onnx DATA.npz
"""
import sys

import numpy as np
import torch


class ResidualBN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 6)
        self.bn = torch.nn.BatchNorm1d(6)
        self.fc2 = torch.nn.Linear(6, 6)
        self.head = torch.nn.Linear(6, 3)
        self.head2 = torch.nn.Linear(6, 3)

    def forward(self, x, y):
        h = torch.relu(self.bn(self.fc1(x)))
        t = h + self.fc2(h)
        return torch.nn.functional.cross_entropy(self.head(t) + self.head2(h), y)


torch.manual_seed(0)
model = ResidualBN().train()
torch.onnx.export(model, (torch.randn(8, 6), torch.zeros(8, dtype=torch.long)), sys.argv[1],
                  input_names=["x", "y"], output_names=["loss"], opset_version=17,
                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
rng = np.random.default_rng(0)
np.savez(sys.argv[2], x=rng.standard_normal((32, 6)).astype(np.float32),
         y=rng.integers(0, 3, 32).astype(np.int64))
