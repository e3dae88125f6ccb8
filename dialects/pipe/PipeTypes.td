//===- PipeTypes.td - pipe dialect types -----------------------*- tablegen -*-===//
#ifndef PIPEC_PIPE_TYPES
#define PIPEC_PIPE_TYPES

include "dialects/pipe/PipeBase.td"

class Pipe_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<Pipe_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def Pipe_WeightsType : Pipe_Type<"Weights", "weights"> {
  let summary = "handle to a stage's weight buffer";
  let description = [{
    The value a `pipe.weight_buffer` defines. The buffer itself (its
    parameters, version count, gradient accumulator and optimizer state) is
    described by that op; the handle carries no parameters so that every
    instruction using it can name it without repeating its type.
  }];
}

def Pipe_ActivationsType : Pipe_Type<"Activations", "activations"> {
  let summary = "handle to an activation buffer";
  let description = [{
    The value a `pipe.activation_buffer` defines: storage of one tensor for
    the micro-batches in flight, read and written by `pipe.save` and
    `pipe.restore`.
  }];
}

#endif // PIPEC_PIPE_TYPES
