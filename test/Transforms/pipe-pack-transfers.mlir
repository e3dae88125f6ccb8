// RUN: pipe-opt %s --split-input-file --pipe-pack-transfers | FileCheck %s

// Two values cross the cut for every micro-batch, both ways, adjacent on
// both devices (saves between them passed over): the first of each pair is
// marked to travel with the second, in the loop and outside it.
// CHECK-LABEL: pipe.program @device0
// CHECK: pipe.send %{{.*}} to 1 mb 0 tag "a" {pipe.pack_next}
// CHECK-NEXT: pipe.save
// CHECK-NEXT: pipe.send %{{.*}} to 1 mb 0 tag "b" :
// CHECK: pipe.loop
// CHECK: pipe.recv from 1 mb %{{.*}} tag "a.grad" {pipe.pack_next}
// CHECK-NEXT: pipe.recv from 1 mb %{{.*}} tag "b.grad" :
// CHECK-LABEL: pipe.program @device1
// CHECK: pipe.recv from 0 mb 0 tag "a" {pipe.pack_next}
// CHECK-NEXT: pipe.recv from 0 mb 0 tag "b" :
// CHECK: pipe.send %{{.*}} to 0 mb %{{.*}} tag "a.grad" {pipe.pack_next}
// CHECK-NEXT: pipe.send %{{.*}} to 0 mb %{{.*}} tag "b.grad" :
pipe.program @device0 device 0 stages [0] schedule "gpipe" microbatches 2 {
  %act = pipe.activation_buffer "b" depth 1 : tensor<2xf32>
  %a = pipe.feed "x" mb 0 : tensor<2xf32>
  %b = pipe.feed "y" mb 0 : tensor<2xf32>
  pipe.send %a to 1 mb 0 tag "a" : tensor<2xf32>
  pipe.save %b into %act mb 0 : tensor<2xf32>
  pipe.send %b to 1 mb 0 tag "b" : tensor<2xf32>
  pipe.loop %k = 0 to 1 {
    %ga = pipe.recv from 1 mb %k tag "a.grad" : tensor<2xf32>
    %gb = pipe.recv from 1 mb %k tag "b.grad" : tensor<2xf32>
  }
}
pipe.program @device1 device 1 stages [1] schedule "gpipe" microbatches 2 {
  %a = pipe.recv from 0 mb 0 tag "a" : tensor<2xf32>
  %b = pipe.recv from 0 mb 0 tag "b" : tensor<2xf32>
  pipe.loop %k = 0 to 1 {
    pipe.send %a to 0 mb %k tag "a.grad" : tensor<2xf32>
    pipe.send %b to 0 mb %k tag "b.grad" : tensor<2xf32>
  }
}

// -----

// Not packed: "a" and "b" (the receiver takes "b" first), "c" and "d" (a
// feed between the sends), "e" and "f" (different micro-batches). "d" and
// "e" are adjacent on both sides and packed.
// CHECK-LABEL: pipe.program @device0
// CHECK-NOT: pipe.pack_next
// CHECK: tag "d" {pipe.pack_next}
// CHECK-NOT: pipe.pack_next
// CHECK-LABEL: pipe.program @device1
// CHECK-NOT: pipe.pack_next
// CHECK: tag "d" {pipe.pack_next}
// CHECK-NOT: pipe.pack_next
pipe.program @device0 device 0 stages [0] schedule "gpipe" microbatches 2 {
  %a = pipe.feed "x" mb 0 : tensor<2xf32>
  pipe.send %a to 1 mb 0 tag "a" : tensor<2xf32>
  pipe.send %a to 1 mb 0 tag "b" : tensor<2xf32>
  %c = pipe.feed "x" mb 1 : tensor<2xf32>
  pipe.send %c to 1 mb 1 tag "c" : tensor<2xf32>
  %d = pipe.feed "y" mb 1 : tensor<2xf32>
  pipe.send %d to 1 mb 1 tag "d" : tensor<2xf32>
  pipe.send %d to 1 mb 1 tag "e" : tensor<2xf32>
  pipe.send %d to 1 mb 0 tag "f" : tensor<2xf32>
}
pipe.program @device1 device 1 stages [1] schedule "gpipe" microbatches 2 {
  %b = pipe.recv from 0 mb 0 tag "b" : tensor<2xf32>
  %a = pipe.recv from 0 mb 0 tag "a" : tensor<2xf32>
  %c = pipe.recv from 0 mb 1 tag "c" : tensor<2xf32>
  %d = pipe.recv from 0 mb 1 tag "d" : tensor<2xf32>
  %e = pipe.recv from 0 mb 1 tag "e" : tensor<2xf32>
  %f = pipe.recv from 0 mb 0 tag "f" : tensor<2xf32>
}
