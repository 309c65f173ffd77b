// RUN: daybreak-opt %s -split-input-file | daybreak-opt -split-input-file | FileCheck %s
// RUN: daybreak-opt %s -split-input-file -mlir-print-op-generic | daybreak-opt -split-input-file | FileCheck %s

// Tests that module-level declarations round-trip: weights, cache pools and
// kernels.
// CHECK-LABEL: plan.weight @layers.0.q_a_proj : tensor<1536x7168xf8E4M3FN> {offset = 4096 : i64, section = 0 : i64}
plan.weight @layers.0.q_a_proj : tensor<1536x7168xf8E4M3FN> {section = 0 : i64, offset = 4096 : i64}
// CHECK: plan.weight @experts : tensor<8x128x64xf4E2M1FN> {offset = 11014144 : i64, section = 1 : i64}
plan.weight @experts : tensor<8x128x64xf4E2M1FN> {section = 1 : i64, offset = 11014144 : i64}
// CHECK: plan.cache_pool @mla_latent {layers = 61 : i64, layout = #lm.kv_layout<mla_latent, page_size = 64, feature_dim = 576, storage = f8E4M3FN, scale_block = 128, tail_dim = 64, tail = bf16>, max_tokens = 131072 : i64}
plan.cache_pool @mla_latent {layers = 61 : i64, max_tokens = 131072 : i64,
    layout = #lm.kv_layout<mla_latent, page_size = 64, feature_dim = 576,
                           storage = f8E4M3FN, scale_block = 128,
                           tail_dim = 64, tail = bf16>}
// CHECK: plan.kernel @rms_norm_256 {entry = "rms_norm_256_bf16", num_args = 3 : i64, target = #plan<target cuda>}
plan.kernel @rms_norm_256 {target = #plan<target cuda>, entry = "rms_norm_256_bf16", num_args = 3 : i64}

// -----

// Tests that a code image round-trips: a library compiled for the plan's
// shapes, with its instantiations and its PTX text.
// CHECK-LABEL: plan.code_image @library format "ptx" arch "sm_90a" instantiations {"daybreak_rms_norm_t<128>" = "_Z19daybreak_rms_norm_tILi128EE"} code "//\0A.version 8.0\0A.target sm_90a\0A"
plan.code_image @library format "ptx" arch "sm_90a"
    instantiations {"daybreak_rms_norm_t<128>" = "_Z19daybreak_rms_norm_tILi128EE"}
    code "//\0A.version 8.0\0A.target sm_90a\0A"

// -----

// Tests that a step with buffers, weight and cache views, launches over a
// grid of runtime sizes, and host steps round-trips.
plan.weight @norm : tensor<256xbf16> {section = 0 : i64, offset = 0 : i64}
plan.cache_pool @idx_keys {layers = 2 : i64, max_tokens = 1024 : i64,
    layout = #lm.kv_layout<indexer_key, page_size = 64, feature_dim = 128,
                           storage = f8E4M3FN, scale_block = 128,
                           tail_dim = 0, tail = bf16>}
plan.kernel @rms_norm {target = #plan<target cpu>, entry = "rms_norm", num_args = 3 : i64}
// CHECK: #[[$GRID:.*]] = affine_map<()[s0, s1] -> (s0 ceildiv 4, 1, 1)>
// CHECK-LABEL: plan.step @decode arena(1048576) sizes ["tokens", "batch"] {
// CHECK-NEXT: ^bb0(%[[T:.*]]: index, %[[B:.*]]: index):
// CHECK: %[[H:.*]] = plan.buffer "hidden" offset(0) (%[[T]]) : memref<?x256xbf16>
// CHECK: %[[O:.*]] = plan.buffer "out" offset(262144) (%[[T]]) : memref<?x256xbf16>
// CHECK: %[[W:.*]] = plan.weight_ref @norm : memref<256xbf16>
// CHECK: plan.cache_ref @idx_keys layer(1) : memref<1024x132xi8>
// CHECK: plan.launch @rms_norm[%[[T]], %[[B]]] grid #[[$GRID]] block [256, 1, 1] smem 0(%[[H]], %[[W]], %[[O]]) {eps = 9.9999999999999995E-7 : f64, num_results = 1 : i64} : memref<?x256xbf16>, memref<256xbf16>, memref<?x256xbf16>
// CHECK: plan.host copy(%[[H]], %[[O]]) : memref<?x256xbf16>, memref<?x256xbf16>
// CHECK: plan.host read_back(%[[O]]) : memref<?x256xbf16>
plan.step @decode arena(1048576) sizes ["tokens", "batch"] {
^bb0(%tokens: index, %batch: index):
  %h = plan.buffer "hidden" offset(0) (%tokens) : memref<?x256xbf16>
  %o = plan.buffer "out" offset(262144) (%tokens) : memref<?x256xbf16>
  %w = plan.weight_ref @norm : memref<256xbf16>
  %c = plan.cache_ref @idx_keys layer(1) : memref<1024x132xi8>
  plan.launch @rms_norm [%tokens, %batch]
      grid affine_map<()[s0, s1] -> (s0 ceildiv 4, 1, 1)> block [256, 1, 1]
      smem 0 (%h, %w, %o) {eps = 1.0e-06 : f64, num_results = 1 : i64}
      : memref<?x256xbf16>, memref<256xbf16>, memref<?x256xbf16>
  plan.host copy (%h, %o) : memref<?x256xbf16>, memref<?x256xbf16>
  plan.host read_back (%o) : memref<?x256xbf16>
}

// -----

// Tests that a launch with no sizes round-trips (a generated kernel with no
// inputs: its one argument is the result).
plan.kernel @fill {target = #plan<target cuda>, entry = "elementwise", num_args = 1 : i64}
// CHECK-LABEL: plan.step @sync
// CHECK: plan.launch @fill[] grid #{{.*}} block [1, 1, 1] smem 0(%{{.*}}) {num_results = 1 : i64, symbol = "fill"} : memref<4xf32>
plan.step @sync arena(256) sizes [] {
  %o = plan.buffer "out" offset(0) () : memref<4xf32>
  plan.launch @fill [] grid affine_map<() -> (1, 1, 1)> block [1, 1, 1] smem 0 (%o)
      {num_results = 1 : i64, symbol = "fill"} : memref<4xf32>
}
