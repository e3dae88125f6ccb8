#!/usr/bin/env python3
"""Writes <out>/<model>_ign.npz: <model>.npz (examples/models.py) with some
labels set to the loss's ignore_index (-100), unevenly over the micro-batches
of batch 8: for the MLP micro-batch 1 of 4 of step 0 has no counted label
(its own mean would be 0/0), for the transformer whole and partial
sequences. Prints each step's counted labels per micro-batch of 4, which
differ, so the micro-batches' means averaged would not be the step's mean.

    make_ignored_labels.py OUT
"""
import sys

import numpy as np

out = sys.argv[1]
d = dict(np.load(f"{out}/mlp.npz"))
y = d["y"]
y[[1, 2, 3, 9, 17, 18, 19, 20, 21]] = -100
np.savez(f"{out}/mlp_ign.npz", **d)
print("mlp counted:", [int((y[i:i + 2] != -100).sum()) for i in range(0, 8, 2)])
d = dict(np.load(f"{out}/transformer.npz"))
t = d["targets"]
t[0, :5] = -100
t[3, :] = -100
t[9:12, 2:] = -100
np.savez(f"{out}/transformer_ign.npz", **d)
print("transformer counted:", [int((t[i:i + 2] != -100).sum()) for i in range(0, 8, 2)])
