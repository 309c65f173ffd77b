// RUN: daybreak-eval %s --function=select --input=3x4xf32=0.5,0.1,0.9,0.3,1,2,3,4,7,7,7,7 --input=3xi32=4,2,0 | FileCheck %s --check-prefix=SELECT
// RUN: daybreak-eval %s --function=embed --input=3xi32=2,0,2 | FileCheck %s --check-prefix=EMBED
// RUN: not daybreak-eval %s --function=embed --input=3xi32=2,5,0 2>&1 | FileCheck %s --check-prefix=BADID
// RUN: not daybreak-eval %s --function=embed --input=3xi64=2,0,2 2>&1 | FileCheck %s --check-prefix=BADTYPE
// RUN: not daybreak-eval %s --function=missing 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not daybreak-eval %s --function=embed --input=3xq7=1 2>&1 | FileCheck %s --check-prefix=BADSPEC

// Tests top-k selection with causal bounds through the tool: row 0 sees all
// 4 keys and keeps the best 2 (0.9 at 2, 0.5 at 0), listed in key order;
// row 1 sees 2 keys (keeps both); row 2 sees none.
// SELECT: result 0: i32[3x2] = {{\[\[}}0, 2], [0, 1], [-1, -1]]
func.func @select(%s: tensor<3x4xf32>, %b: tensor<3xi32>) -> tensor<3x2xi32> {
  %i = lm.dsa_index_select %s, %b {top_k = 2 : i64} : (tensor<3x4xf32>, tensor<3xi32>) -> tensor<3x2xi32>
  return %i : tensor<3x2xi32>
}

// Tests an embedding lookup on a constant table, and the messages for a
// token id outside the vocabulary, a wrong argument type, an unknown
// function and a malformed input spec.
// EMBED: result 0: f32[3x2] = {{\[\[}}4, 5], [0, 1], [4, 5]]
// BADID: daybreak-eval: in @embed, lm.embedding at {{.*}}: {{.*}}5{{.*}}
// BADTYPE: @embed argument 0: expected element type i32, got i64[3]
// MISSING: no function @missing
// BADSPEC: bad tensor spec '3xq7=1': unknown element type 'q7'
func.func @embed(%ids: tensor<3xi32>) -> tensor<3x2xf32> {
  %t = arith.constant dense<[[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]> : tensor<3x2xf32>
  %h = lm.embedding %t, %ids : (tensor<3x2xf32>, tensor<3xi32>) -> tensor<3x2xf32>
  return %h : tensor<3x2xf32>
}

// Tests that the evaluator runs fused elementwise bodies: silu(a) * b + c on
// hand-checked values (silu(0) = 0, silu(2) = 2 / (1 + e^-2) = 1.7615942).
// RUN: daybreak-eval %s --function=fused --input=2xf32=0,2 --input=2xf32=3,0.5 --input=2xf32=1,1 | FileCheck %s --check-prefix=FUSED
// FUSED: result 0: f32[2] = [1, 1.8808]
func.func @fused(%a: tensor<2xf32>, %b: tensor<2xf32>, %c: tensor<2xf32>) -> tensor<2xf32> {
  %r = lm.elementwise (%a, %b, %c) : (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32> {
  ^bb0(%x: f32, %y: f32, %z: f32):
    %n = arith.negf %x : f32
    %e = math.exp %n : f32
    %one = arith.constant 1.0 : f32
    %d = arith.addf %one, %e : f32
    %s = arith.divf %x, %d : f32
    %m = arith.mulf %s, %y : f32
    %o = arith.addf %m, %z : f32
    lm.yield %o : f32
  }
  return %r : tensor<2xf32>
}
