#!/usr/bin/env python3
"""Exports examples/models.py's decoder with more blocks, for partitioning
tests:  export_decoder.py PIPEC_SRC OUT.onnx LAYERS"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(sys.argv[1], "examples"))
import models  # noqa: E402

torch.manual_seed(0)
model = models.Decoder(layers=int(sys.argv[3]))
model.train()
tokens = torch.randint(0, 32, (4, 9))
torch.onnx.export(model, (tokens[:, :8].contiguous(), tokens[:, 1:].contiguous()),
                  sys.argv[2], input_names=["tokens", "targets"],
                  output_names=["loss"], opset_version=17,
                  do_constant_folding=False,
                  training=torch.onnx.TrainingMode.TRAINING)
