// RUN: daybreak-opt %s -verify-diagnostics --lm-assign-kv-layout="kv-cache-dtype=int4"
// RUN: not daybreak-opt %s --lm-assign-kv-layout="page-size=0" 2>&1 | FileCheck %s --check-prefix=PAGE

// Tests that an unknown cache storage type is reported on the module (the
// pass checks its options before looking at any cache).
// PAGE: error: page-size must be positive
// expected-error @+1 {{unsupported kv-cache-dtype 'int4' (expected fp8, bf16 or f32)}}
module {
  func.func @mla(%c: tensor<2x64x576xbf16>, %kv: tensor<?x576xbf16>, %slots: tensor<?xi32>,
                 %seq: tensor<?xi32>) -> tensor<2x64x576xbf16> {
    %c1 = lm.cache_write %c, %kv, %slots sequences %seq
        : (tensor<2x64x576xbf16>, tensor<?x576xbf16>, tensor<?xi32>, tensor<?xi32>) -> tensor<2x64x576xbf16>
    return %c1 : tensor<2x64x576xbf16>
  }
}
