// RUN: daybreak-opt %s --lm-lower-to-plan | FileCheck %s
// Pools are named after their layout's kind; two layouts of one kind (here
// two MLA latent caches of different widths) need distinct names.

// Tests that caches of one kind but different layouts get distinct pools.
// CHECK-DAG: plan.cache_pool @[[$P80:[^ ]*]] {{{.*}}feature_dim = 80,
// CHECK-DAG: plan.cache_pool @[[$P128:[^ ]*]] {{{.*}}feature_dim = 128,
// CHECK-LABEL: plan.step @two_latents
// CHECK-DAG: plan.cache_ref @[[$P80]] layer(0) : memref<128x100xi8>
// CHECK-DAG: plan.cache_ref @[[$P128]] layer(0) : memref<128x172xi8>
#a = #lm.kv_layout<mla_latent, page_size = 64, feature_dim = 80, storage = f8E4M3FN, scale_block = 64, tail_dim = 16, tail = bf16>
#b = #lm.kv_layout<mla_latent, page_size = 64, feature_dim = 128, storage = f8E4M3FN, scale_block = 32, tail_dim = 32, tail = bf16>
func.func @two_latents(%c: tensor<2x64x80xf32>, %kv: tensor<?x80xf32>, %d: tensor<2x64x128xf32>,
                       %kv2: tensor<?x128xf32>, %slots: tensor<?xi32>, %seq: tensor<?xi32>)
    -> (tensor<2x64x80xf32>, tensor<2x64x128xf32>) {
  %c1 = lm.cache_write %c, %kv, %slots sequences %seq {layout = #a}
      : (tensor<2x64x80xf32>, tensor<?x80xf32>, tensor<?xi32>, tensor<?xi32>) -> tensor<2x64x80xf32>
  %d1 = lm.cache_write %d, %kv2, %slots sequences %seq {layout = #b}
      : (tensor<2x64x128xf32>, tensor<?x128xf32>, tensor<?xi32>, tensor<?xi32>) -> tensor<2x64x128xf32>
  return %c1, %d1 : tensor<2x64x80xf32>, tensor<2x64x128xf32>
}
