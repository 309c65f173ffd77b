// RUN: daybreak-opt %s -split-input-file --lm-fuse-projections | FileCheck %s
// RUN: daybreak-opt %s -split-input-file --lm-fuse-projections --lm-narrow-rope | FileCheck %s --check-prefix=NARROW

// Tests MLA's three projections of the normalised input (q_a, the indexer's
// wk, kv_a): one FP8 matmul over the stacked codes and scales, the parts
// with whole 128-row scale blocks first (q_a, wk), kv_a's partial block
// last; each part a column slice of the whole, kv_a's own slice composed
// into one slice of the whole, and the separate declarations gone.
// CHECK-LABEL: module
// CHECK-NOT: lm.weight @qa :
// CHECK-DAG: lm.weight @"qa+wk+kva" : tensor<464x256xf8E4M3FN> {sources = ["q_a", "wk", "kv_a"]}
// CHECK-DAG: lm.weight @"qas+wks+kvas" : tensor<4x2xf32> {sources = ["q_a.scale", "wk.scale", "kv_a.scale"]}
// CHECK-LABEL: func.func @mla
// CHECK-SAME: (%[[X:.*]]: tensor<?x256xf32>, %[[POS:.*]]: tensor<?xi32>)
// CHECK: %[[W:.*]] = lm.weight_ref @"qa+wk+kva"
// CHECK: %[[S:.*]] = lm.weight_ref @"qas+wks+kvas"
// CHECK: %[[ALL:.*]] = lm.fp8_matmul %[[X]], %[[W]], %[[S]] {block_size = array<i64: 128, 128>} : (tensor<?x256xf32>, tensor<464x256xf8E4M3FN>, tensor<4x2xf32>) -> tensor<?x464xf32>
// CHECK-DAG: %[[QA:.*]] = tensor.extract_slice %[[ALL]][0, 0] [%{{.*}}, 256] [1, 1]
// CHECK-DAG: %[[WK:.*]] = tensor.extract_slice %[[ALL]][0, 256] [%{{.*}}, 128] [1, 1]
// CHECK-DAG: %[[KV:.*]] = tensor.extract_slice %[[ALL]][0, 384] [%{{.*}}, 80] [1, 1]
// CHECK-DAG: %[[LATENT:.*]] = tensor.extract_slice %[[ALL]][0, 384] [%{{.*}}, 64] [1, 1]
// CHECK-DAG: lm.rms_norm %[[QA]]
// CHECK-DAG: lm.layer_norm %[[WK]]
// CHECK-DAG: lm.rms_norm %[[LATENT]]
// CHECK-DAG: lm.rope %[[KV]], %[[POS]]
// CHECK-NOT: lm.fp8_matmul
// After lm-narrow-rope, the rope reads the rotated columns of the whole.
// NARROW-LABEL: func.func @mla
// NARROW: %[[ALL:.*]] = lm.fp8_matmul
// NARROW-DAG: %[[PE:.*]] = tensor.extract_slice %[[ALL]][0, 448] [%{{.*}}, 16] [1, 1]
// NARROW-DAG: lm.rope %[[PE]], %{{.*}} interleaved {dim = 16 : i64, offset = 0 : i64
lm.weight @qa : tensor<256x256xf8E4M3FN> {sources = ["q_a"]}
lm.weight @qas : tensor<2x2xf32> {sources = ["q_a.scale"]}
lm.weight @kva : tensor<80x256xf8E4M3FN> {sources = ["kv_a"]}
lm.weight @kvas : tensor<1x2xf32> {sources = ["kv_a.scale"]}
lm.weight @wk : tensor<128x256xf8E4M3FN> {sources = ["wk"]}
lm.weight @wks : tensor<1x2xf32> {sources = ["wk.scale"]}
lm.weight @n : tensor<256xbf16> {sources = ["n"]}
lm.weight @n64 : tensor<64xbf16> {sources = ["n64"]}
lm.weight @n128 : tensor<128xbf16> {sources = ["n128"]}
lm.weight @b128 : tensor<128xbf16> {sources = ["b128"]}
func.func @mla(%x: tensor<?x256xf32>, %pos: tensor<?xi32>)
    -> (tensor<?x256xf32>, tensor<?x64xf32>, tensor<?x16xf32>, tensor<?x128xf32>) {
  %c0 = arith.constant 0 : index
  %qa = lm.weight_ref @qa : tensor<256x256xf8E4M3FN>
  %qas = lm.weight_ref @qas : tensor<2x2xf32>
  %q = lm.fp8_matmul %x, %qa, %qas {block_size = array<i64: 128, 128>}
      : (tensor<?x256xf32>, tensor<256x256xf8E4M3FN>, tensor<2x2xf32>) -> tensor<?x256xf32>
  %n = lm.weight_ref @n : tensor<256xbf16>
  %qn = lm.rms_norm %q, %n {eps = 1.0e-6 : f64}
      : (tensor<?x256xf32>, tensor<256xbf16>) -> tensor<?x256xf32>
  %kva = lm.weight_ref @kva : tensor<80x256xf8E4M3FN>
  %kvas = lm.weight_ref @kvas : tensor<1x2xf32>
  %kv = lm.fp8_matmul %x, %kva, %kvas {block_size = array<i64: 128, 128>}
      : (tensor<?x256xf32>, tensor<80x256xf8E4M3FN>, tensor<1x2xf32>) -> tensor<?x80xf32>
  %t = tensor.dim %kv, %c0 : tensor<?x80xf32>
  %latent = tensor.extract_slice %kv[0, 0] [%t, 64] [1, 1]
      : tensor<?x80xf32> to tensor<?x64xf32>
  %n64 = lm.weight_ref @n64 : tensor<64xbf16>
  %ln = lm.rms_norm %latent, %n64 {eps = 1.0e-6 : f64}
      : (tensor<?x64xf32>, tensor<64xbf16>) -> tensor<?x64xf32>
  %r = lm.rope %kv, %pos interleaved {offset = 64 : i64, dim = 16 : i64, theta = 10000.0 : f64}
      : (tensor<?x80xf32>, tensor<?xi32>) -> tensor<?x80xf32>
  %t2 = tensor.dim %r, %c0 : tensor<?x80xf32>
  %pe = tensor.extract_slice %r[0, 64] [%t2, 16] [1, 1]
      : tensor<?x80xf32> to tensor<?x16xf32>
  %wk = lm.weight_ref @wk : tensor<128x256xf8E4M3FN>
  %wks = lm.weight_ref @wks : tensor<1x2xf32>
  %k = lm.fp8_matmul %x, %wk, %wks {block_size = array<i64: 128, 128>}
      : (tensor<?x256xf32>, tensor<128x256xf8E4M3FN>, tensor<1x2xf32>) -> tensor<?x128xf32>
  %n128 = lm.weight_ref @n128 : tensor<128xbf16>
  %b128 = lm.weight_ref @b128 : tensor<128xbf16>
  %kn = lm.layer_norm %k, %n128 bias %b128 {eps = 1.0e-6 : f64}
      : (tensor<?x128xf32>, tensor<128xbf16>, tensor<128xbf16>) -> tensor<?x128xf32>
  return %qn, %ln, %pe, %kn : tensor<?x256xf32>, tensor<?x64xf32>, tensor<?x16xf32>, tensor<?x128xf32>
}

// -----

// Tests that of several FP8 projections with partial scale blocks only the
// first joins (last): a block straddling two parts would scale one part's
// rows by the other's scale.
// CHECK-LABEL: module
// CHECK-DAG: lm.weight @"a+b" : tensor<208x64xf8E4M3FN> {sources = ["a", "b"]}
// CHECK-DAG: lm.weight @c : tensor<48x64xf8E4M3FN>
// CHECK-LABEL: func.func @partial
// CHECK: lm.fp8_matmul %arg0, %{{.*}}, %{{.*}} {{.*}} -> tensor<?x208xf32>
// CHECK: lm.fp8_matmul %arg0, %{{.*}}, %{{.*}} {{.*}} -> tensor<?x48xf32>
lm.weight @a : tensor<128x64xf8E4M3FN> {sources = ["a"]}
lm.weight @as : tensor<1x1xf32> {sources = ["a.scale"]}
lm.weight @b : tensor<80x64xf8E4M3FN> {sources = ["b"]}
lm.weight @bs : tensor<1x1xf32> {sources = ["b.scale"]}
lm.weight @c : tensor<48x64xf8E4M3FN> {sources = ["c"]}
lm.weight @cs : tensor<1x1xf32> {sources = ["c.scale"]}
lm.weight @na : tensor<128xf32> {sources = ["na"]}
lm.weight @nb : tensor<80xf32> {sources = ["nb"]}
lm.weight @nc : tensor<48xf32> {sources = ["nc"]}
func.func @partial(%x: tensor<?x64xf32>)
    -> (tensor<?x128xf32>, tensor<?x80xf32>, tensor<?x48xf32>) {
  %a = lm.weight_ref @a : tensor<128x64xf8E4M3FN>
  %as = lm.weight_ref @as : tensor<1x1xf32>
  %ya = lm.fp8_matmul %x, %a, %as {block_size = array<i64: 128, 128>}
      : (tensor<?x64xf32>, tensor<128x64xf8E4M3FN>, tensor<1x1xf32>) -> tensor<?x128xf32>
  %b = lm.weight_ref @b : tensor<80x64xf8E4M3FN>
  %bs = lm.weight_ref @bs : tensor<1x1xf32>
  %yb = lm.fp8_matmul %x, %b, %bs {block_size = array<i64: 128, 128>}
      : (tensor<?x64xf32>, tensor<80x64xf8E4M3FN>, tensor<1x1xf32>) -> tensor<?x80xf32>
  %c = lm.weight_ref @c : tensor<48x64xf8E4M3FN>
  %cs = lm.weight_ref @cs : tensor<1x1xf32>
  %yc = lm.fp8_matmul %x, %c, %cs {block_size = array<i64: 128, 128>}
      : (tensor<?x64xf32>, tensor<48x64xf8E4M3FN>, tensor<1x1xf32>) -> tensor<?x48xf32>
  %na = lm.weight_ref @na : tensor<128xf32>
  %nb = lm.weight_ref @nb : tensor<80xf32>
  %nc = lm.weight_ref @nc : tensor<48xf32>
  %za = lm.rms_norm %ya, %na {eps = 1.0e-6 : f64} : (tensor<?x128xf32>, tensor<128xf32>) -> tensor<?x128xf32>
  %zb = lm.rms_norm %yb, %nb {eps = 1.0e-6 : f64} : (tensor<?x80xf32>, tensor<80xf32>) -> tensor<?x80xf32>
  %zc = lm.rms_norm %yc, %nc {eps = 1.0e-6 : f64} : (tensor<?x48xf32>, tensor<48xf32>) -> tensor<?x48xf32>
  return %za, %zb, %zc : tensor<?x128xf32>, tensor<?x80xf32>, tensor<?x48xf32>
}

// -----

// Tests plain projections with biases: weights and biases stack alike, in
// both functions that read them, to one declaration each.
// CHECK-LABEL: module
// CHECK-DAG: lm.weight @"p+q" : tensor<48x32xbf16> {sources = ["p", "q"]}
// CHECK-DAG: lm.weight @"pb+qb" : tensor<48xbf16> {sources = ["p.bias", "q.bias"]}
// CHECK-LABEL: func.func @biased
// CHECK: %[[ALL:.*]] = lm.matmul %arg0, %{{.*}} bias %{{.*}} : (tensor<?x32xf32>, tensor<48x32xbf16>, tensor<48xbf16>) -> tensor<?x48xf32>
// CHECK-DAG: tensor.extract_slice %[[ALL]][0, 0] [%{{.*}}, 16] [1, 1]
// CHECK-DAG: tensor.extract_slice %[[ALL]][0, 16] [%{{.*}}, 32] [1, 1]
// CHECK-NOT: lm.matmul
// CHECK-LABEL: func.func @biased_again
// CHECK: lm.matmul %arg0, %{{.*}} bias %{{.*}} -> tensor<?x48xf32>
// CHECK-NOT: lm.matmul
lm.weight @p : tensor<16x32xbf16> {sources = ["p"]}
lm.weight @pb : tensor<16xbf16> {sources = ["p.bias"]}
lm.weight @q : tensor<32x32xbf16> {sources = ["q"]}
lm.weight @qb : tensor<32xbf16> {sources = ["q.bias"]}
lm.weight @np : tensor<16xf32> {sources = ["np"]}
lm.weight @nq : tensor<32xf32> {sources = ["nq"]}
func.func @biased(%x: tensor<?x32xf32>) -> (tensor<?x16xf32>, tensor<?x32xf32>) {
  %p = lm.weight_ref @p : tensor<16x32xbf16>
  %pb = lm.weight_ref @pb : tensor<16xbf16>
  %yp = lm.matmul %x, %p bias %pb : (tensor<?x32xf32>, tensor<16x32xbf16>, tensor<16xbf16>) -> tensor<?x16xf32>
  %q = lm.weight_ref @q : tensor<32x32xbf16>
  %qb = lm.weight_ref @qb : tensor<32xbf16>
  %yq = lm.matmul %x, %q bias %qb : (tensor<?x32xf32>, tensor<32x32xbf16>, tensor<32xbf16>) -> tensor<?x32xf32>
  %np = lm.weight_ref @np : tensor<16xf32>
  %nq = lm.weight_ref @nq : tensor<32xf32>
  %zp = lm.rms_norm %yp, %np {eps = 1.0e-6 : f64} : (tensor<?x16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
  %zq = lm.rms_norm %yq, %nq {eps = 1.0e-6 : f64} : (tensor<?x32xf32>, tensor<32xf32>) -> tensor<?x32xf32>
  return %zp, %zq : tensor<?x16xf32>, tensor<?x32xf32>
}
func.func @biased_again(%x: tensor<?x32xf32>) -> (tensor<?x16xf32>, tensor<?x32xf32>) {
  %p = lm.weight_ref @p : tensor<16x32xbf16>
  %pb = lm.weight_ref @pb : tensor<16xbf16>
  %yp = lm.matmul %x, %p bias %pb : (tensor<?x32xf32>, tensor<16x32xbf16>, tensor<16xbf16>) -> tensor<?x16xf32>
  %q = lm.weight_ref @q : tensor<32x32xbf16>
  %qb = lm.weight_ref @qb : tensor<32xbf16>
  %yq = lm.matmul %x, %q bias %qb : (tensor<?x32xf32>, tensor<32x32xbf16>, tensor<32xbf16>) -> tensor<?x32xf32>
  %np = lm.weight_ref @np : tensor<16xf32>
  %nq = lm.weight_ref @nq : tensor<32xf32>
  %zp = lm.rms_norm %yp, %np {eps = 1.0e-6 : f64} : (tensor<?x16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
  %zq = lm.rms_norm %yq, %nq {eps = 1.0e-6 : f64} : (tensor<?x32xf32>, tensor<32xf32>) -> tensor<?x32xf32>
  return %zp, %zq : tensor<?x16xf32>, tensor<?x32xf32>
}

// -----

// Tests what stays apart: a projection read by a kernel without a view slot
// (returned, or by a matmul), one with a bias beside one without, one of
// another input, one of another weight type.
// CHECK-LABEL: func.func @apart
// CHECK-COUNT-5: lm.matmul
// CHECK-NOT: lm.matmul
// CHECK-NOT: tensor.extract_slice
lm.weight @u : tensor<16x32xbf16> {sources = ["u"]}
lm.weight @v : tensor<16x32xbf16> {sources = ["v"]}
lm.weight @vb : tensor<16xbf16> {sources = ["v.bias"]}
lm.weight @w : tensor<16x32xf32> {sources = ["w"]}
lm.weight @o : tensor<16x16xbf16> {sources = ["o"]}
lm.weight @nu : tensor<16xf32> {sources = ["nu"]}
func.func @apart(%x: tensor<?x32xf32>, %y: tensor<?x32xf32>)
    -> (tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x16xf32>) {
  %u = lm.weight_ref @u : tensor<16x32xbf16>
  %yu = lm.matmul %x, %u : (tensor<?x32xf32>, tensor<16x32xbf16>) -> tensor<?x16xf32>
  %v = lm.weight_ref @v : tensor<16x32xbf16>
  %vb = lm.weight_ref @vb : tensor<16xbf16>
  %yv = lm.matmul %x, %v bias %vb : (tensor<?x32xf32>, tensor<16x32xbf16>, tensor<16xbf16>) -> tensor<?x16xf32>
  %w = lm.weight_ref @w : tensor<16x32xf32>
  %yw = lm.matmul %x, %w : (tensor<?x32xf32>, tensor<16x32xf32>) -> tensor<?x16xf32>
  %yu2 = lm.matmul %y, %u : (tensor<?x32xf32>, tensor<16x32xbf16>) -> tensor<?x16xf32>
  %o = lm.weight_ref @o : tensor<16x16xbf16>
  %yo = lm.matmul %yu, %o : (tensor<?x16xf32>, tensor<16x16xbf16>) -> tensor<?x16xf32>
  %nu = lm.weight_ref @nu : tensor<16xf32>
  %zv = lm.rms_norm %yv, %nu {eps = 1.0e-6 : f64} : (tensor<?x16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
  %zw = lm.rms_norm %yw, %nu {eps = 1.0e-6 : f64} : (tensor<?x16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
  %zu2 = lm.rms_norm %yu2, %nu {eps = 1.0e-6 : f64} : (tensor<?x16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
  return %yo, %zv, %zw, %zu2, %yu : tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x16xf32>
}

// -----

// Tests that FP8 projections of other block sizes stay apart (their scales
// index other rows).
// CHECK-LABEL: func.func @blocks
// CHECK-COUNT-2: lm.fp8_matmul
// CHECK-NOT: tensor.extract_slice
lm.weight @a : tensor<128x64xf8E4M3FN> {sources = ["a"]}
lm.weight @as : tensor<1x1xf32> {sources = ["a.scale"]}
lm.weight @b : tensor<128x64xf8E4M3FN> {sources = ["b"]}
lm.weight @bs : tensor<2x1xf32> {sources = ["b.scale"]}
lm.weight @n : tensor<128xf32> {sources = ["n"]}
func.func @blocks(%x: tensor<?x64xf32>) -> (tensor<?x128xf32>, tensor<?x128xf32>) {
  %a = lm.weight_ref @a : tensor<128x64xf8E4M3FN>
  %as = lm.weight_ref @as : tensor<1x1xf32>
  %ya = lm.fp8_matmul %x, %a, %as {block_size = array<i64: 128, 128>}
      : (tensor<?x64xf32>, tensor<128x64xf8E4M3FN>, tensor<1x1xf32>) -> tensor<?x128xf32>
  %b = lm.weight_ref @b : tensor<128x64xf8E4M3FN>
  %bs = lm.weight_ref @bs : tensor<2x1xf32>
  %yb = lm.fp8_matmul %x, %b, %bs {block_size = array<i64: 64, 128>}
      : (tensor<?x64xf32>, tensor<128x64xf8E4M3FN>, tensor<2x1xf32>) -> tensor<?x128xf32>
  %n = lm.weight_ref @n : tensor<128xf32>
  %za = lm.rms_norm %ya, %n {eps = 1.0e-6 : f64} : (tensor<?x128xf32>, tensor<128xf32>) -> tensor<?x128xf32>
  %zb = lm.rms_norm %yb, %n {eps = 1.0e-6 : f64} : (tensor<?x128xf32>, tensor<128xf32>) -> tensor<?x128xf32>
  return %za, %zb : tensor<?x128xf32>, tensor<?x128xf32>
}
