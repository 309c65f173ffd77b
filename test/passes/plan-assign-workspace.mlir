// RUN: daybreak-opt %s -split-input-file --plan-assign-workspace | FileCheck %s

// Tests that buffers live at disjoint launches share offset 0, that one live
// at the same time as both goes after the larger, 256-byte aligned, that
// the arena is the peak rounded up to 256 (512 + 40 -> 768), and that each
// buffer records the launches it lives between (`live`).
plan.kernel @k2 {target = #plan<target cpu>, entry = "elementwise", num_args = 2 : i64}
// CHECK-LABEL: plan.step @disjoint arena(768)
// CHECK: plan.buffer "a" offset(0) {live = array<i64: 0, 0>} : memref<100xf32>
// CHECK: plan.buffer "b" offset(0) {live = array<i64: 1, 1>} : memref<64xf32>
// CHECK: plan.buffer "c" offset(512) {live = array<i64: 0, 1>} : memref<10xf32>
plan.step @disjoint arena(1048576) sizes ["tokens"] attributes {max_sizes = array<i64: 4>} {
^bb0(%t: index):
  %a = plan.buffer "a" offset(0) : memref<100xf32>
  %b = plan.buffer "b" offset(0) : memref<64xf32>
  %c = plan.buffer "c" offset(0) : memref<10xf32>
  plan.launch @k2 [%t] grid affine_map<()[s0] -> (s0, 1, 1)> block [1, 1, 1] smem 0 (%a, %c) {num_results = 1 : i64, symbol = "f"} : memref<100xf32>, memref<10xf32>
  plan.launch @k2 [%t] grid affine_map<()[s0] -> (s0, 1, 1)> block [1, 1, 1] smem 0 (%b, %c) {num_results = 1 : i64, symbol = "f"} : memref<64xf32>, memref<10xf32>
}

// -----

// Tests that step inputs and outputs live through the whole step: "in" (read
// only by the first launch) and "out" (written only by the last) keep their
// bytes for the whole step, while "x", "y" and "z", each used by one of the
// launches in between, share one offset after them.
plan.kernel @k1 {target = #plan<target cpu>, entry = "elementwise", num_args = 1 : i64}
// CHECK-LABEL: plan.step @io arena(768)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: plan.buffer "in" offset(0) {io = "input"} : memref<64xf32>
// CHECK-NEXT: plan.buffer "x" offset(256) {live = array<i64: 2, 2>} : memref<64xf32>
// CHECK-NEXT: plan.buffer "out" offset(512) {io = "output"} : memref<64xf32>
// CHECK-NEXT: plan.buffer "y" offset(256) {live = array<i64: 1, 1>} : memref<64xf32>
// CHECK-NEXT: plan.buffer "z" offset(256) {live = array<i64: 3, 3>} : memref<64xf32>
plan.step @io arena(1048576) sizes ["tokens"] attributes {max_sizes = array<i64: 4>} {
^bb0(%t: index):
  %in = plan.buffer "in" offset(0) {io = "input"} : memref<64xf32>
  %x = plan.buffer "x" offset(0) : memref<64xf32>
  %out = plan.buffer "out" offset(0) {io = "output"} : memref<64xf32>
  %y = plan.buffer "y" offset(0) : memref<64xf32>
  %z = plan.buffer "z" offset(0) : memref<64xf32>
  plan.launch @k1 [%t] grid affine_map<()[s0] -> (s0, 1, 1)> block [1, 1, 1] smem 0 (%in) {num_results = 1 : i64, symbol = "f"} : memref<64xf32>
  plan.launch @k1 [%t] grid affine_map<()[s0] -> (s0, 1, 1)> block [1, 1, 1] smem 0 (%y) {num_results = 1 : i64, symbol = "f"} : memref<64xf32>
  plan.launch @k1 [%t] grid affine_map<()[s0] -> (s0, 1, 1)> block [1, 1, 1] smem 0 (%x) {num_results = 1 : i64, symbol = "f"} : memref<64xf32>
  plan.launch @k1 [%t] grid affine_map<()[s0] -> (s0, 1, 1)> block [1, 1, 1] smem 0 (%z) {num_results = 1 : i64, symbol = "f"} : memref<64xf32>
  plan.launch @k1 [%t] grid affine_map<()[s0] -> (s0, 1, 1)> block [1, 1, 1] smem 0 (%out) {num_results = 1 : i64, symbol = "f"} : memref<64xf32>
}

// -----

// Tests that buffers of one name (a reshape alias) get one offset and one
// live range, the union of their uses: "b", used between the two views of
// "a", cannot take a's bytes. Dynamic buffers take max_sizes (16 x 64 f32 =
// 4096 bytes).
plan.kernel @k1 {target = #plan<target cpu>, entry = "elementwise", num_args = 1 : i64}
plan.kernel @k2 {target = #plan<target cpu>, entry = "elementwise", num_args = 2 : i64}
// CHECK-LABEL: plan.step @alias arena(8448)
// CHECK-NEXT: ^bb0(%[[T:.*]]: index):
// CHECK-NEXT: plan.buffer "in" offset(0) (%[[T]]) {io = "input"} : memref<?x64xf32>
// CHECK-NEXT: plan.buffer "a" offset(4096) (%[[T]]) {live = array<i64: 0, 2>} : memref<?x64xf32>
// CHECK-NEXT: plan.buffer "a" offset(4096) (%[[T]]) {live = array<i64: 0, 2>} : memref<?x4x16xf32>
// CHECK-NEXT: plan.buffer "b" offset(8192) {live = array<i64: 1, 1>} : memref<64xf32>
plan.step @alias arena(1048576) sizes ["tokens"] attributes {max_sizes = array<i64: 16>} {
^bb0(%t: index):
  %in = plan.buffer "in" offset(0) (%t) {io = "input"} : memref<?x64xf32>
  %a = plan.buffer "a" offset(0) (%t) : memref<?x64xf32>
  %ar = plan.buffer "a" offset(0) (%t) : memref<?x4x16xf32>
  %b = plan.buffer "b" offset(0) : memref<64xf32>
  plan.launch @k2 [%t] grid affine_map<()[s0] -> (s0, 1, 1)> block [1, 1, 1] smem 0 (%in, %a) {num_results = 1 : i64, symbol = "f"} : memref<?x64xf32>, memref<?x64xf32>
  plan.launch @k1 [%t] grid affine_map<()[s0] -> (s0, 1, 1)> block [1, 1, 1] smem 0 (%b) {num_results = 1 : i64, symbol = "f"} : memref<64xf32>
  plan.launch @k1 [%t] grid affine_map<()[s0] -> (s0, 1, 1)> block [1, 1, 1] smem 0 (%ar) {num_results = 1 : i64, symbol = "f"} : memref<?x4x16xf32>
}

// -----

// Tests that a dynamic dim takes the max size of the step argument it is
// given: "p" is [batch, 64] f32 with batch <= 2 (512 bytes), "q" [tokens, 64]
// with tokens <= 16 (4096 bytes); both live at once.
plan.kernel @k2 {target = #plan<target cpu>, entry = "elementwise", num_args = 2 : i64}
// CHECK-LABEL: plan.step @two_sizes arena(4608) sizes ["tokens", "batch"]
// CHECK-NEXT: ^bb0(%[[T:.*]]: index, %[[B:.*]]: index):
// CHECK-NEXT: plan.buffer "p" offset(4096) (%[[B]]) {live = array<i64: 0, 0>} : memref<?x64xf32>
// CHECK-NEXT: plan.buffer "q" offset(0) (%[[T]]) {live = array<i64: 0, 0>} : memref<?x64xf32>
plan.step @two_sizes arena(1048576) sizes ["tokens", "batch"] attributes {max_sizes = array<i64: 16, 2>} {
^bb0(%t: index, %bt: index):
  %p = plan.buffer "p" offset(0) (%bt) : memref<?x64xf32>
  %q = plan.buffer "q" offset(0) (%t) : memref<?x64xf32>
  plan.launch @k2 [%t] grid affine_map<()[s0] -> (s0, 1, 1)> block [1, 1, 1] smem 0 (%p, %q) {num_results = 1 : i64, symbol = "f"} : memref<?x64xf32>, memref<?x64xf32>
}
