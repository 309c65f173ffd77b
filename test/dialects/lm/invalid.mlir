// RUN: daybreak-opt %s -split-input-file -verify-diagnostics

// One case per verifier rule of the lm ops (dialects/lm/LmOps.cpp) and
// attributes (dialects/lm/LmAttrs.cpp), plus representative ODS
// element-type failures. Each case breaks exactly one rule of an
// otherwise valid op.

// Tests that lm.rms_norm rejects a rank-0 input (it normalises over the last dim).
func.func @rms_norm_input_rank0(%x: tensor<f32>, %w: tensor<16xf32>) {
  // expected-error @+1 {{'lm.rms_norm' op expects input of rank >= 1, got 'tensor<f32>'}}
  %r = lm.rms_norm %x, %w {eps = 1.0e-06 : f64} : (tensor<f32>, tensor<16xf32>) -> tensor<f32>
  return
}

// -----

// Tests that lm.add_rms_norm rejects a residual of another type than its input.
func.func @add_rms_norm_residual_type(%x: tensor<4x16xf32>, %r: tensor<4x16xbf16>, %w: tensor<16xf32>) {
  // expected-error @+1 {{'lm.add_rms_norm' op expects input, residual and sum of one type, got 'tensor<4x16xf32>', 'tensor<4x16xbf16>' and 'tensor<4x16xf32>'}}
  %s, %y = lm.add_rms_norm %x, %r, %w {eps = 1.0e-06 : f64} : (tensor<4x16xf32>, tensor<4x16xbf16>, tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>)
  return
}

// -----

// Tests that lm.add_rms_norm checks its norm as lm.rms_norm does: the weight
// has the input's last dim.
func.func @add_rms_norm_weight_dim(%x: tensor<4x16xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'lm.add_rms_norm' op expects weight dim 0 (8) to equal input dim -1 (16)}}
  %s, %y = lm.add_rms_norm %x, %x, %w {eps = 1.0e-06 : f64} : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<8xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>)
  return
}

// -----

// Tests that lm.rms_norm rejects a weight that is not rank 1.
func.func @rms_norm_weight_rank(%x: tensor<4x16xf32>, %w: tensor<1x16xf32>) {
  // expected-error @+1 {{'lm.rms_norm' op expects weight of rank 1, got 'tensor<1x16xf32>'}}
  %r = lm.rms_norm %x, %w {eps = 1.0e-06 : f64} : (tensor<4x16xf32>, tensor<1x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

// Tests that lm.rms_norm rejects a weight whose size differs from the input's last dim.
func.func @rms_norm_weight_dim(%x: tensor<4x16xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'lm.rms_norm' op expects weight dim 0 (8) to equal input dim -1 (16)}}
  %r = lm.rms_norm %x, %w {eps = 1.0e-06 : f64} : (tensor<4x16xf32>, tensor<8xf32>) -> tensor<4x16xf32>
  return
}

// -----

// Tests that lm.rms_norm rejects a result whose rank differs from the input's.
func.func @rms_norm_result_rank(%x: tensor<4x16xf32>, %w: tensor<16xf32>) {
  // expected-error @+1 {{'lm.rms_norm' op expects result and input of the same shape, got 'tensor<64xf32>' and 'tensor<4x16xf32>'}}
  %r = lm.rms_norm %x, %w {eps = 1.0e-06 : f64} : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<64xf32>
  return
}

// -----

// Tests that lm.rms_norm rejects a result whose dims differ from the input's.
func.func @rms_norm_result_dim(%x: tensor<4x16xf32>, %w: tensor<16xf32>) {
  // expected-error @+1 {{'lm.rms_norm' op expects result dim 0 (5) to equal input dim 0 (4)}}
  %r = lm.rms_norm %x, %w {eps = 1.0e-06 : f64} : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<5x16xf32>
  return
}

// -----

// Tests that lm.rms_norm rejects eps = 0.
func.func @rms_norm_eps_zero(%x: tensor<4x16xf32>, %w: tensor<16xf32>) {
  // expected-error @+1 {{'lm.rms_norm' op expects eps > 0, got 0.000000e+00}}
  %r = lm.rms_norm %x, %w {eps = 0.0 : f64} : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return
}

// -----

// Tests that lm.rms_norm rejects a negative eps.
func.func @rms_norm_eps_negative(%x: tensor<4x16xf32>, %w: tensor<16xf32>) {
  // expected-error @+1 {{'lm.rms_norm' op expects eps > 0, got -1.000000e-06}}
  %r = lm.rms_norm %x, %w {eps = -1.0e-06 : f64} : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return
}

// -----

// Tests that lm.rms_norm rejects an integer input (ODS: f32, bf16 or f16).
func.func @rms_norm_ods_input_elem(%x: tensor<4x16xi32>, %w: tensor<16xf32>) {
  // expected-error @+1 {{'lm.rms_norm' op operand #0 must be ranked tensor of 32-bit float or bfloat16 type or 16-bit float values, but got 'tensor<4x16xi32>'}}
  %r = lm.rms_norm %x, %w {eps = 1.0e-06 : f64} : (tensor<4x16xi32>, tensor<16xf32>) -> tensor<4x16xf32>
  return
}

// -----

// Tests that lm.rms_norm rejects an f64 weight (ODS: f32, bf16 or f16).
func.func @rms_norm_ods_weight_f64(%x: tensor<4x16xf32>, %w: tensor<16xf64>) {
  // expected-error @+1 {{'lm.rms_norm' op operand #1 must be ranked tensor of 32-bit float or bfloat16 type or 16-bit float values, but got 'tensor<16xf64>'}}
  %r = lm.rms_norm %x, %w {eps = 1.0e-06 : f64} : (tensor<4x16xf32>, tensor<16xf64>) -> tensor<4x16xf32>
  return
}

// -----

// Tests that lm.rms_norm rejects an unranked input (ODS: ranked tensors only).
func.func @rms_norm_ods_unranked(%x: tensor<*xf32>, %w: tensor<16xf32>) {
  // expected-error @+1 {{'lm.rms_norm' op operand #0 must be ranked tensor of 32-bit float or bfloat16 type or 16-bit float values, but got 'tensor<*xf32>'}}
  %r = lm.rms_norm %x, %w {eps = 1.0e-06 : f64} : (tensor<*xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return
}

// -----

// Tests that lm.layer_norm rejects a bias that is not rank 1.
func.func @layer_norm_bias_rank(%x: tensor<4x16xf32>, %w: tensor<16xf32>, %b: tensor<2x8xf32>) {
  // expected-error @+1 {{'lm.layer_norm' op expects bias of rank 1, got 'tensor<2x8xf32>'}}
  %r = lm.layer_norm %x, %w bias %b {eps = 1.0e-05 : f64} : (tensor<4x16xf32>, tensor<16xf32>, tensor<2x8xf32>) -> tensor<4x16xf32>
  return
}

// -----

// Tests that lm.layer_norm rejects a bias whose size differs from the weight's.
func.func @layer_norm_bias_dim(%x: tensor<4x16xf32>, %w: tensor<16xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'lm.layer_norm' op expects bias dim 0 (8) to equal weight dim 0 (16)}}
  %r = lm.layer_norm %x, %w bias %b {eps = 1.0e-05 : f64} : (tensor<4x16xf32>, tensor<16xf32>, tensor<8xf32>) -> tensor<4x16xf32>
  return
}

// -----

// Tests that lm.layer_norm rejects a weight whose size differs from the input's last dim.
func.func @layer_norm_weight_dim(%x: tensor<4x16xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'lm.layer_norm' op expects weight dim 0 (8) to equal input dim -1 (16)}}
  %r = lm.layer_norm %x, %w {eps = 1.0e-05 : f64} : (tensor<4x16xf32>, tensor<8xf32>) -> tensor<4x16xf32>
  return
}

// -----

// Tests that lm.layer_norm rejects a rank-0 input.
func.func @layer_norm_input_rank0(%x: tensor<f32>, %w: tensor<16xf32>) {
  // expected-error @+1 {{'lm.layer_norm' op expects input of rank >= 1, got 'tensor<f32>'}}
  %r = lm.layer_norm %x, %w {eps = 1.0e-05 : f64} : (tensor<f32>, tensor<16xf32>) -> tensor<f32>
  return
}

// -----

// Tests that lm.layer_norm rejects a result whose dims differ from the input's.
func.func @layer_norm_result_dim(%x: tensor<4x16xf32>, %w: tensor<16xf32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{'lm.layer_norm' op expects result dim 1 (32) to equal input dim 1 (16)}}
  %r = lm.layer_norm %x, %w bias %b {eps = 1.0e-05 : f64} : (tensor<4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x32xf32>
  return
}

// -----

// Tests that lm.layer_norm rejects eps = 0.
func.func @layer_norm_eps(%x: tensor<4x16xf32>, %w: tensor<16xf32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{'lm.layer_norm' op expects eps > 0, got 0.000000e+00}}
  %r = lm.layer_norm %x, %w bias %b {eps = 0.0 : f64} : (tensor<4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return
}

// -----

// Tests that lm.layer_norm rejects an integer bias (ODS).
func.func @layer_norm_ods_bias_elem(%x: tensor<4x16xf32>, %w: tensor<16xf32>, %b: tensor<16xi8>) {
  // expected-error @+1 {{'lm.layer_norm' op operand #2 must be ranked tensor of 32-bit float or bfloat16 type or 16-bit float values, but got 'tensor<16xi8>'}}
  %r = lm.layer_norm %x, %w bias %b {eps = 1.0e-05 : f64} : (tensor<4x16xf32>, tensor<16xf32>, tensor<16xi8>) -> tensor<4x16xf32>
  return
}

// -----

// Tests that lm.gated_rms_norm rejects a gate whose rank differs from the input's.
func.func @gated_rms_norm_gate_rank(%x: tensor<4x2x16xf32>, %gate: tensor<4x32xf32>, %w: tensor<16xf32>) {
  // expected-error @+1 {{'lm.gated_rms_norm' op expects gate and input of the same shape, got 'tensor<4x32xf32>' and 'tensor<4x2x16xf32>'}}
  %r = lm.gated_rms_norm %x, %gate, %w sigmoid {eps = 1.0e-05 : f64} : (tensor<4x2x16xf32>, tensor<4x32xf32>, tensor<16xf32>) -> tensor<4x2x16xf32>
  return
}

// -----

// Tests that lm.gated_rms_norm rejects a gate whose dims differ from the input's.
func.func @gated_rms_norm_gate_dim(%x: tensor<4x2x16xf32>, %gate: tensor<4x2x8xf32>, %w: tensor<16xf32>) {
  // expected-error @+1 {{'lm.gated_rms_norm' op expects gate dim 2 (8) to equal input dim 2 (16)}}
  %r = lm.gated_rms_norm %x, %gate, %w sigmoid {eps = 1.0e-05 : f64} : (tensor<4x2x16xf32>, tensor<4x2x8xf32>, tensor<16xf32>) -> tensor<4x2x16xf32>
  return
}

// -----

// Tests that lm.gated_rms_norm rejects the `none` activation (the gate must be activated).
func.func @gated_rms_norm_act_none(%x: tensor<4x2x16xf32>, %gate: tensor<4x2x16xf32>, %w: tensor<16xf32>) {
  // expected-error @+1 {{'lm.gated_rms_norm' op expects a sigmoid or silu gate activation}}
  %r = lm.gated_rms_norm %x, %gate, %w none {eps = 1.0e-05 : f64} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<16xf32>) -> tensor<4x2x16xf32>
  return
}

// -----

// Tests that lm.gated_rms_norm rejects a weight whose size differs from the input's last dim.
func.func @gated_rms_norm_weight_dim(%x: tensor<4x2x16xf32>, %gate: tensor<4x2x16xf32>, %w: tensor<32xf32>) {
  // expected-error @+1 {{'lm.gated_rms_norm' op expects weight dim 0 (32) to equal input dim -1 (16)}}
  %r = lm.gated_rms_norm %x, %gate, %w sigmoid {eps = 1.0e-05 : f64} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<32xf32>) -> tensor<4x2x16xf32>
  return
}

// -----

// Tests that lm.gated_rms_norm rejects a weight that is not rank 1.
func.func @gated_rms_norm_weight_rank(%x: tensor<4x2x16xf32>, %gate: tensor<4x2x16xf32>, %w: tensor<2x16xf32>) {
  // expected-error @+1 {{'lm.gated_rms_norm' op expects weight of rank 1, got 'tensor<2x16xf32>'}}
  %r = lm.gated_rms_norm %x, %gate, %w sigmoid {eps = 1.0e-05 : f64} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<2x16xf32>) -> tensor<4x2x16xf32>
  return
}

// -----

// Tests that lm.gated_rms_norm rejects a result whose dims differ from the input's.
func.func @gated_rms_norm_result(%x: tensor<4x2x16xf32>, %gate: tensor<4x2x16xf32>, %w: tensor<16xf32>) {
  // expected-error @+1 {{'lm.gated_rms_norm' op expects result dim 2 (15) to equal input dim 2 (16)}}
  %r = lm.gated_rms_norm %x, %gate, %w sigmoid {eps = 1.0e-05 : f64} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<16xf32>) -> tensor<4x2x15xf32>
  return
}

// -----

// Tests that lm.gated_rms_norm rejects a negative eps.
func.func @gated_rms_norm_eps(%x: tensor<4x2x16xf32>, %gate: tensor<4x2x16xf32>, %w: tensor<16xf32>) {
  // expected-error @+1 {{'lm.gated_rms_norm' op expects eps > 0, got -5.000000e-01}}
  %r = lm.gated_rms_norm %x, %gate, %w sigmoid {eps = -0.5 : f64} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<16xf32>) -> tensor<4x2x16xf32>
  return
}

// -----

// Tests that lm.gated_rms_norm rejects rank-0 input and gate.
func.func @gated_rms_norm_input_rank0(%x: tensor<f32>, %gate: tensor<f32>, %w: tensor<16xf32>) {
  // expected-error @+1 {{'lm.gated_rms_norm' op expects input of rank >= 1, got 'tensor<f32>'}}
  %r = lm.gated_rms_norm %x, %gate, %w sigmoid {eps = 1.0e-05 : f64} : (tensor<f32>, tensor<f32>, tensor<16xf32>) -> tensor<f32>
  return
}

// -----

// Tests that lm.silu rejects an f64 tensor (ODS: f32, bf16 or f16).
func.func @silu_ods_f64(%x: tensor<4xf64>) {
  // expected-error @+1 {{'lm.silu' op operand #0 must be ranked tensor of 32-bit float or bfloat16 type or 16-bit float values, but got 'tensor<4xf64>'}}
  %r = lm.silu %x : tensor<4xf64>
  return
}

// -----

// Tests that lm.sigmoid rejects an integer tensor (ODS).
func.func @sigmoid_ods_int(%x: tensor<4xi32>) {
  // expected-error @+1 {{'lm.sigmoid' op operand #0 must be ranked tensor of 32-bit float or bfloat16 type or 16-bit float values, but got 'tensor<4xi32>'}}
  %r = lm.sigmoid %x : tensor<4xi32>
  return
}

// -----

// Tests that lm.sigmoid (generic form) rejects a result type that differs from the operand's.
func.func @sigmoid_ods_result_type(%x: tensor<4xf32>) {
  // expected-error @+1 {{'lm.sigmoid' op requires the same type for all operands and results}}
  %r = "lm.sigmoid"(%x) : (tensor<4xf32>) -> tensor<4xbf16>
  return
}

// -----

// Tests that lm.swiglu rejects an up operand whose rank differs from the gate's.
func.func @swiglu_up_rank(%g: tensor<4x64xf32>, %u: tensor<256xf32>) {
  // expected-error @+1 {{'lm.swiglu' op expects up and gate of the same shape, got 'tensor<256xf32>' and 'tensor<4x64xf32>'}}
  %r = lm.swiglu %g, %u : (tensor<4x64xf32>, tensor<256xf32>) -> tensor<4x64xf32>
  return
}

// -----

// Tests that lm.swiglu rejects an up operand whose dims differ from the gate's.
func.func @swiglu_up_dim(%g: tensor<4x64xf32>, %u: tensor<4x32xf32>) {
  // expected-error @+1 {{'lm.swiglu' op expects up dim 1 (32) to equal gate dim 1 (64)}}
  %r = lm.swiglu %g, %u : (tensor<4x64xf32>, tensor<4x32xf32>) -> tensor<4x64xf32>
  return
}

// -----

// Tests that lm.swiglu rejects a result whose dims differ from the gate's.
func.func @swiglu_result_dim(%g: tensor<4x64xf32>, %u: tensor<4x64xf32>) {
  // expected-error @+1 {{'lm.swiglu' op expects result dim 0 (8) to equal gate dim 0 (4)}}
  %r = lm.swiglu %g, %u : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

// Tests that lm.swiglu rejects a result whose rank differs from the gate's.
func.func @swiglu_result_rank(%g: tensor<4x64xf32>, %u: tensor<4x64xf32>) {
  // expected-error @+1 {{'lm.swiglu' op expects result and gate of the same shape, got 'tensor<4x64x1xf32>' and 'tensor<4x64xf32>'}}
  %r = lm.swiglu %g, %u : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64x1xf32>
  return
}

// -----

// Tests that lm.swiglu rejects limit = 0.
func.func @swiglu_limit_zero(%g: tensor<4x64xf32>, %u: tensor<4x64xf32>) {
  // expected-error @+1 {{'lm.swiglu' op expects limit > 0, got 0.000000e+00}}
  %r = lm.swiglu %g, %u {limit = 0.0 : f64} : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

// Tests that lm.swiglu rejects a negative limit.
func.func @swiglu_limit_negative(%g: tensor<4x64xf32>, %u: tensor<4x64xf32>) {
  // expected-error @+1 {{'lm.swiglu' op expects limit > 0, got -7.000000e+00}}
  %r = lm.swiglu %g, %u {limit = -7.0 : f64} : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

// Tests that lm.swiglu rejects an f32 limit attribute (ODS: f64).
func.func @swiglu_ods_limit_f32(%g: tensor<4x64xf32>, %u: tensor<4x64xf32>) {
  // expected-error @+1 {{'lm.swiglu' op attribute 'limit' failed to satisfy constraint: 64-bit float attribute}}
  %r = lm.swiglu %g, %u {limit = 7.0 : f32} : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

// Tests that lm.situ rejects an up operand whose dims differ from the gate's.
func.func @situ_up_dim(%g: tensor<4x64xf32>, %u: tensor<4x63xf32>) {
  // expected-error @+1 {{'lm.situ' op expects up dim 1 (63) to equal gate dim 1 (64)}}
  %r = lm.situ %g, %u {beta = 4.0 : f64, linear_beta = 25.0 : f64} : (tensor<4x64xf32>, tensor<4x63xf32>) -> tensor<4x64xf32>
  return
}

// -----

// Tests that lm.situ rejects a result whose rank differs from the gate's.
func.func @situ_result_rank(%g: tensor<4x64xf32>, %u: tensor<4x64xf32>) {
  // expected-error @+1 {{'lm.situ' op expects result and gate of the same shape, got 'tensor<256xf32>' and 'tensor<4x64xf32>'}}
  %r = lm.situ %g, %u {beta = 4.0 : f64, linear_beta = 25.0 : f64} : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<256xf32>
  return
}

// -----

// Tests that lm.situ rejects beta = 0.
func.func @situ_beta(%g: tensor<4x64xf32>, %u: tensor<4x64xf32>) {
  // expected-error @+1 {{'lm.situ' op expects beta > 0, got 0.000000e+00}}
  %r = lm.situ %g, %u {beta = 0.0 : f64, linear_beta = 25.0 : f64} : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

// Tests that lm.situ rejects a negative linear_beta.
func.func @situ_linear_beta(%g: tensor<4x64xf32>, %u: tensor<4x64xf32>) {
  // expected-error @+1 {{'lm.situ' op expects linear_beta > 0, got -2.500000e+01}}
  %r = lm.situ %g, %u {beta = 4.0 : f64, linear_beta = -25.0 : f64} : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

// Tests that lm.situ requires the beta attribute (ODS).
func.func @situ_ods_missing_beta(%g: tensor<4x64xf32>, %u: tensor<4x64xf32>) {
  // expected-error @+1 {{'lm.situ' op requires attribute 'beta'}}
  %r = lm.situ %g, %u {linear_beta = 25.0 : f64} : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

// Tests that lm.rope rejects an input of rank < 2 ([T, ..., D]).
func.func @rope_input_rank(%x: tensor<48xf32>, %pos: tensor<4xi32>) {
  // expected-error @+1 {{'lm.rope' op expects input of rank >= 2, got 'tensor<48xf32>'}}
  %r = lm.rope %x, %pos interleaved {offset = 0 : i64, dim = 16 : i64, theta = 10000.0 : f64} : (tensor<48xf32>, tensor<4xi32>) -> tensor<48xf32>
  return
}

// -----

// Tests that lm.rope rejects positions that are not rank 1.
func.func @rope_positions_rank(%x: tensor<4x2x48xf32>, %pos: tensor<4x1xi32>) {
  // expected-error @+1 {{'lm.rope' op expects positions of rank 1, got 'tensor<4x1xi32>'}}
  %r = lm.rope %x, %pos interleaved {offset = 0 : i64, dim = 16 : i64, theta = 10000.0 : f64} : (tensor<4x2x48xf32>, tensor<4x1xi32>) -> tensor<4x2x48xf32>
  return
}

// -----

// Tests that lm.rope rejects positions whose size differs from the input's token dim.
func.func @rope_positions_dim(%x: tensor<4x2x48xf32>, %pos: tensor<3xi32>) {
  // expected-error @+1 {{'lm.rope' op expects positions dim 0 (3) to equal input dim 0 (4)}}
  %r = lm.rope %x, %pos interleaved {offset = 0 : i64, dim = 16 : i64, theta = 10000.0 : f64} : (tensor<4x2x48xf32>, tensor<3xi32>) -> tensor<4x2x48xf32>
  return
}

// -----

// Tests that lm.rope rejects a result whose shape differs from the input's.
func.func @rope_result_shape(%x: tensor<4x2x48xf32>, %pos: tensor<4xi32>) {
  // expected-error @+1 {{'lm.rope' op expects result dim 2 (32) to equal input dim 2 (48)}}
  %r = lm.rope %x, %pos interleaved {offset = 0 : i64, dim = 16 : i64, theta = 10000.0 : f64} : (tensor<4x2x48xf32>, tensor<4xi32>) -> tensor<4x2x32xf32>
  return
}

// -----

// Tests that lm.rope rejects an odd rotary dim.
func.func @rope_dim_odd(%x: tensor<4x2x48xf32>, %pos: tensor<4xi32>) {
  // expected-error @+1 {{'lm.rope' op expects a positive even rotary dim, got 15}}
  %r = lm.rope %x, %pos interleaved {offset = 0 : i64, dim = 15 : i64, theta = 10000.0 : f64} : (tensor<4x2x48xf32>, tensor<4xi32>) -> tensor<4x2x48xf32>
  return
}

// -----

// Tests that lm.rope rejects a zero rotary dim.
func.func @rope_dim_zero(%x: tensor<4x2x48xf32>, %pos: tensor<4xi32>) {
  // expected-error @+1 {{'lm.rope' op expects a positive even rotary dim, got 0}}
  %r = lm.rope %x, %pos interleaved {offset = 0 : i64, dim = 0 : i64, theta = 10000.0 : f64} : (tensor<4x2x48xf32>, tensor<4xi32>) -> tensor<4x2x48xf32>
  return
}

// -----

// Tests that lm.rope rejects a negative rotary dim.
func.func @rope_dim_negative(%x: tensor<4x2x48xf32>, %pos: tensor<4xi32>) {
  // expected-error @+1 {{'lm.rope' op expects a positive even rotary dim, got -16}}
  %r = lm.rope %x, %pos interleaved {offset = 0 : i64, dim = -16 : i64, theta = 10000.0 : f64} : (tensor<4x2x48xf32>, tensor<4xi32>) -> tensor<4x2x48xf32>
  return
}

// -----

// Tests that lm.rope's head_dim takes rows [T, W] of whole heads only.
func.func @rope_head_dim_partial(%x: tensor<4x48xf32>, %pos: tensor<4xi32>) {
  // expected-error @+1 {{'lm.rope' op expects rows [T, W] of whole heads of 20 columns with head_dim}}
  %r = lm.rope %x, %pos interleaved {offset = 0 : i64, dim = 16 : i64, theta = 10000.0 : f64, head_dim = 20 : i64} : (tensor<4x48xf32>, tensor<4xi32>) -> tensor<4x48xf32>
  return
}

// -----

func.func @rope_head_dim_rank(%x: tensor<4x2x48xf32>, %pos: tensor<4xi32>) {
  // expected-error @+1 {{'lm.rope' op expects rows [T, W] of whole heads of 16 columns with head_dim}}
  %r = lm.rope %x, %pos interleaved {offset = 0 : i64, dim = 16 : i64, theta = 10000.0 : f64, head_dim = 16 : i64} : (tensor<4x2x48xf32>, tensor<4xi32>) -> tensor<4x2x48xf32>
  return
}

// -----

func.func @rope_head_dim_zero(%x: tensor<4x48xf32>, %pos: tensor<4xi32>) {
  // expected-error @+1 {{'lm.rope' op expects a positive head_dim, got 0}}
  %r = lm.rope %x, %pos interleaved {offset = 0 : i64, dim = 16 : i64, theta = 10000.0 : f64, head_dim = 0 : i64} : (tensor<4x48xf32>, tensor<4xi32>) -> tensor<4x48xf32>
  return
}

// -----

// Tests that with head_dim the rotated slice must lie inside each head.
func.func @rope_head_dim_slice(%x: tensor<4x48xf32>, %pos: tensor<4xi32>) {
  // expected-error @+1 {{'lm.rope' op expects the rotated slice [8, 24) inside each head of size 16}}
  %r = lm.rope %x, %pos interleaved {offset = 8 : i64, dim = 16 : i64, theta = 10000.0 : f64, head_dim = 16 : i64} : (tensor<4x48xf32>, tensor<4xi32>) -> tensor<4x48xf32>
  return
}

// -----

// Tests that lm.rope rejects a negative offset.
func.func @rope_offset_negative(%x: tensor<4x2x48xf32>, %pos: tensor<4xi32>) {
  // expected-error @+1 {{'lm.rope' op expects offset >= 0, got -2}}
  %r = lm.rope %x, %pos interleaved {offset = -2 : i64, dim = 16 : i64, theta = 10000.0 : f64} : (tensor<4x2x48xf32>, tensor<4xi32>) -> tensor<4x2x48xf32>
  return
}

// -----

// Tests that lm.rope rejects a rotated slice that runs past the last dim.
func.func @rope_slice_outside(%x: tensor<4x2x48xf32>, %pos: tensor<4xi32>) {
  // expected-error @+1 {{'lm.rope' op expects the rotated slice [40, 56) inside the last dim of size 48}}
  %r = lm.rope %x, %pos interleaved {offset = 40 : i64, dim = 16 : i64, theta = 10000.0 : f64} : (tensor<4x2x48xf32>, tensor<4xi32>) -> tensor<4x2x48xf32>
  return
}

// -----

// Tests that lm.rope rejects theta = 0.
func.func @rope_theta(%x: tensor<4x2x48xf32>, %pos: tensor<4xi32>) {
  // expected-error @+1 {{'lm.rope' op expects theta > 0, got 0.000000e+00}}
  %r = lm.rope %x, %pos interleaved {offset = 0 : i64, dim = 16 : i64, theta = 0.0 : f64} : (tensor<4x2x48xf32>, tensor<4xi32>) -> tensor<4x2x48xf32>
  return
}

// -----

// Tests that lm.rope rejects float positions (ODS: i32 or i64).
func.func @rope_ods_positions_f32(%x: tensor<4x2x48xf32>, %pos: tensor<4xf32>) {
  // expected-error @+1 {{'lm.rope' op operand #1 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xf32>'}}
  %r = lm.rope %x, %pos interleaved {offset = 0 : i64, dim = 16 : i64, theta = 10000.0 : f64} : (tensor<4x2x48xf32>, tensor<4xf32>) -> tensor<4x2x48xf32>
  return
}

// -----

// Tests that lm.rope rejects i16 positions (ODS: i32 or i64).
func.func @rope_ods_positions_i16(%x: tensor<4x2x48xf32>, %pos: tensor<4xi16>) {
  // expected-error @+1 {{'lm.rope' op operand #1 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xi16>'}}
  %r = lm.rope %x, %pos interleaved {offset = 0 : i64, dim = 16 : i64, theta = 10000.0 : f64} : (tensor<4x2x48xf32>, tensor<4xi16>) -> tensor<4x2x48xf32>
  return
}

// -----

// Tests that #lm.yarn rejects a factor below 1 (it would stretch, not compress, frequencies).
func.func @yarn_factor(%x: tensor<4x2x48xf32>, %pos: tensor<4xi32>) {
  // expected-error @+1 {{expects a YaRN factor >= 1, got 5.000000e-01}}
  %r = lm.rope %x, %pos interleaved {offset = 0 : i64, dim = 16 : i64, theta = 10000.0 : f64, yarn = #lm.yarn<factor = 0.5, original_max_positions = 4096, beta_fast = 32.0, beta_slow = 1.0, attention_factor = 1.0, truncate = true>} : (tensor<4x2x48xf32>, tensor<4xi32>) -> tensor<4x2x48xf32>
  return
}

// -----

// Tests that #lm.yarn rejects original_max_positions = 0.
func.func @yarn_original_max_positions(%x: tensor<4x2x48xf32>, %pos: tensor<4xi32>) {
  // expected-error @+1 {{expects original_max_positions > 0, got 0}}
  %r = lm.rope %x, %pos interleaved {offset = 0 : i64, dim = 16 : i64, theta = 10000.0 : f64, yarn = #lm.yarn<factor = 40.0, original_max_positions = 0, beta_fast = 32.0, beta_slow = 1.0, attention_factor = 1.0, truncate = true>} : (tensor<4x2x48xf32>, tensor<4xi32>) -> tensor<4x2x48xf32>
  return
}

// -----

// Tests that #lm.yarn rejects beta_fast <= beta_slow.
func.func @yarn_beta_order(%x: tensor<4x2x48xf32>, %pos: tensor<4xi32>) {
  // expected-error @+1 {{expects beta_fast > beta_slow > 0, got 1.000000e+00 and 3.200000e+01}}
  %r = lm.rope %x, %pos interleaved {offset = 0 : i64, dim = 16 : i64, theta = 10000.0 : f64, yarn = #lm.yarn<factor = 40.0, original_max_positions = 4096, beta_fast = 1.0, beta_slow = 32.0, attention_factor = 1.0, truncate = true>} : (tensor<4x2x48xf32>, tensor<4xi32>) -> tensor<4x2x48xf32>
  return
}

// -----

// Tests that #lm.yarn rejects beta_fast == beta_slow.
func.func @yarn_beta_equal(%x: tensor<4x2x48xf32>, %pos: tensor<4xi32>) {
  // expected-error @+1 {{expects beta_fast > beta_slow > 0, got 2.000000e+00 and 2.000000e+00}}
  %r = lm.rope %x, %pos interleaved {offset = 0 : i64, dim = 16 : i64, theta = 10000.0 : f64, yarn = #lm.yarn<factor = 40.0, original_max_positions = 4096, beta_fast = 2.0, beta_slow = 2.0, attention_factor = 1.0, truncate = true>} : (tensor<4x2x48xf32>, tensor<4xi32>) -> tensor<4x2x48xf32>
  return
}

// -----

// Tests that #lm.yarn rejects beta_slow = 0.
func.func @yarn_beta_slow(%x: tensor<4x2x48xf32>, %pos: tensor<4xi32>) {
  // expected-error @+1 {{expects beta_fast > beta_slow > 0, got 3.200000e+01 and 0.000000e+00}}
  %r = lm.rope %x, %pos interleaved {offset = 0 : i64, dim = 16 : i64, theta = 10000.0 : f64, yarn = #lm.yarn<factor = 40.0, original_max_positions = 4096, beta_fast = 32.0, beta_slow = 0.0, attention_factor = 1.0, truncate = true>} : (tensor<4x2x48xf32>, tensor<4xi32>) -> tensor<4x2x48xf32>
  return
}

// -----

// Tests that #lm.yarn rejects attention_factor = 0.
func.func @yarn_attention_factor(%x: tensor<4x2x48xf32>, %pos: tensor<4xi32>) {
  // expected-error @+1 {{expects attention_factor > 0, got 0.000000e+00}}
  %r = lm.rope %x, %pos interleaved {offset = 0 : i64, dim = 16 : i64, theta = 10000.0 : f64, yarn = #lm.yarn<factor = 40.0, original_max_positions = 4096, beta_fast = 32.0, beta_slow = 1.0, attention_factor = 0.0, truncate = true>} : (tensor<4x2x48xf32>, tensor<4xi32>) -> tensor<4x2x48xf32>
  return
}

// -----

// Tests that #lm.yarn rejects a non-float factor.
func.func @yarn_param_kind(%x: tensor<4x2x48xf32>, %pos: tensor<4xi32>) {
  // expected-error @+2 {{invalid kind of attribute specified}}
  // expected-error @+1 {{failed to parse Lm_YarnAttr parameter 'factor' which is to be a `::mlir::FloatAttr`}}
  %r = lm.rope %x, %pos interleaved {offset = 0 : i64, dim = 16 : i64, theta = 10000.0 : f64, yarn = #lm.yarn<factor = true, original_max_positions = 4096, beta_fast = 32.0, beta_slow = 1.0, attention_factor = 1.0, truncate = true>} : (tensor<4x2x48xf32>, tensor<4xi32>) -> tensor<4x2x48xf32>
  return
}

// -----

// Tests that #lm.yarn errors point at the attribute's own line in a multi-line op.
func.func @yarn_multiline(%x: tensor<4x2x48xf32>, %pos: tensor<4xi32>) {
  // expected-error @+3 {{expects original_max_positions > 0, got -1}}
  %r = lm.rope %x, %pos half_split {offset = 0 : i64, dim = 16 : i64,
      theta = 10000.0 : f64,
      yarn = #lm.yarn<factor = 4.0, original_max_positions = -1,
      beta_fast = 32.0, beta_slow = 1.0,
      attention_factor = 1.0, truncate = false>}
      : (tensor<4x2x48xf32>, tensor<4xi32>) -> tensor<4x2x48xf32>
  return
}

// -----

// Tests that lm.rope rejects a yarn attribute of another kind (ODS).
func.func @rope_ods_yarn_kind(%x: tensor<4x2x48xf32>, %pos: tensor<4xi32>) {
  // expected-error @+1 {{'lm.rope' op attribute 'yarn' failed to satisfy constraint: YaRN (NTK-by-parts) RoPE frequency correction}}
  %r = lm.rope %x, %pos interleaved {offset = 0 : i64, dim = 16 : i64, theta = 10000.0 : f64, yarn = #lm.state_layout<storage = f32, key_major = true>} : (tensor<4x2x48xf32>, tensor<4xi32>) -> tensor<4x2x48xf32>
  return
}

// -----

// Tests that lm.matmul rejects a rank-0 input.
func.func @matmul_input_rank0(%x: tensor<bf16>, %w: tensor<512x256xbf16>) {
  // expected-error @+1 {{'lm.matmul' op expects input of rank >= 1, got 'tensor<bf16>'}}
  %r = lm.matmul %x, %w : (tensor<bf16>, tensor<512x256xbf16>) -> tensor<512xbf16>
  return
}

// -----

// Tests that lm.matmul rejects a weight that is not rank 2 ([N, K]).
func.func @matmul_weight_rank(%x: tensor<8x256xbf16>, %w: tensor<512x256x1xbf16>) {
  // expected-error @+1 {{'lm.matmul' op expects weight of rank 2, got 'tensor<512x256x1xbf16>'}}
  %r = lm.matmul %x, %w : (tensor<8x256xbf16>, tensor<512x256x1xbf16>) -> tensor<8x512xbf16>
  return
}

// -----

// Tests that lm.matmul rejects a weight whose K differs from the input's last dim (a transposed weight).
func.func @matmul_weight_k(%x: tensor<8x256xbf16>, %w: tensor<256x512xbf16>) {
  // expected-error @+1 {{'lm.matmul' op expects weight dim 1 (512) to equal input dim -1 (256)}}
  %r = lm.matmul %x, %w : (tensor<8x256xbf16>, tensor<256x512xbf16>) -> tensor<8x256xbf16>
  return
}

// -----

// Tests that lm.matmul rejects a result whose rank differs from the input's.
func.func @matmul_result_rank(%x: tensor<8x256xbf16>, %w: tensor<512x256xbf16>) {
  // expected-error @+1 {{'lm.matmul' op expects result of rank 2, got 'tensor<4x2x512xbf16>'}}
  %r = lm.matmul %x, %w : (tensor<8x256xbf16>, tensor<512x256xbf16>) -> tensor<4x2x512xbf16>
  return
}

// -----

// Tests that lm.matmul rejects a result whose leading dims differ from the input's.
func.func @matmul_result_lead(%x: tensor<2x8x256xbf16>, %w: tensor<512x256xbf16>) {
  // expected-error @+1 {{'lm.matmul' op expects result dim 1 (9) to equal input dim 1 (8)}}
  %r = lm.matmul %x, %w : (tensor<2x8x256xbf16>, tensor<512x256xbf16>) -> tensor<2x9x512xbf16>
  return
}

// -----

// Tests that lm.matmul rejects a result whose last dim differs from the weight's N.
func.func @matmul_result_n(%x: tensor<8x256xbf16>, %w: tensor<512x256xbf16>) {
  // expected-error @+1 {{'lm.matmul' op expects result dim -1 (256) to equal weight dim 0 (512)}}
  %r = lm.matmul %x, %w : (tensor<8x256xbf16>, tensor<512x256xbf16>) -> tensor<8x256xbf16>
  return
}

// -----

// Tests that lm.matmul rejects a bias that is not rank 1.
func.func @matmul_bias_rank(%x: tensor<8x256xbf16>, %w: tensor<512x256xbf16>, %b: tensor<1x512xbf16>) {
  // expected-error @+1 {{'lm.matmul' op expects bias of rank 1, got 'tensor<1x512xbf16>'}}
  %r = lm.matmul %x, %w bias %b : (tensor<8x256xbf16>, tensor<512x256xbf16>, tensor<1x512xbf16>) -> tensor<8x512xbf16>
  return
}

// -----

// Tests that lm.matmul rejects a bias whose size differs from the weight's N.
func.func @matmul_bias_dim(%x: tensor<8x256xbf16>, %w: tensor<512x256xbf16>, %b: tensor<256xbf16>) {
  // expected-error @+1 {{'lm.matmul' op expects bias dim 0 (256) to equal weight dim 0 (512)}}
  %r = lm.matmul %x, %w bias %b : (tensor<8x256xbf16>, tensor<512x256xbf16>, tensor<256xbf16>) -> tensor<8x512xbf16>
  return
}

// -----

// Tests that lm.matmul rejects an FP8 weight (ODS; FP8 weights go through lm.fp8_matmul).
func.func @matmul_ods_weight_fp8(%x: tensor<8x256xbf16>, %w: tensor<512x256xf8E4M3FN>) {
  // expected-error @+1 {{'lm.matmul' op operand #1 must be ranked tensor of 32-bit float or bfloat16 type or 16-bit float values, but got 'tensor<512x256xf8E4M3FN>'}}
  %r = lm.matmul %x, %w : (tensor<8x256xbf16>, tensor<512x256xf8E4M3FN>) -> tensor<8x512xbf16>
  return
}

// -----

// Tests that lm.matmul rejects an integer result (ODS).
func.func @matmul_ods_result_int(%x: tensor<8x256xbf16>, %w: tensor<512x256xbf16>) {
  // expected-error @+1 {{'lm.matmul' op result #0 must be ranked tensor of 32-bit float or bfloat16 type or 16-bit float values, but got 'tensor<8x512xi32>'}}
  %r = lm.matmul %x, %w : (tensor<8x256xbf16>, tensor<512x256xbf16>) -> tensor<8x512xi32>
  return
}

// -----

// Tests that lm.fp8_matmul rejects a weight whose K differs from the input's last dim.
func.func @fp8_matmul_weight_k(%x: tensor<4x256xbf16>, %w: tensor<200x300xf8E4M3FN>, %s: tensor<2x3xf32>) {
  // expected-error @+1 {{'lm.fp8_matmul' op expects weight dim 1 (300) to equal input dim -1 (256)}}
  %r = lm.fp8_matmul %x, %w, %s {block_size = array<i64: 128, 128>} : (tensor<4x256xbf16>, tensor<200x300xf8E4M3FN>, tensor<2x3xf32>) -> tensor<4x200xbf16>
  return
}

// -----

// Tests that lm.fp8_matmul rejects a weight that is not rank 2.
func.func @fp8_matmul_weight_rank(%x: tensor<4x300xbf16>, %w: tensor<300xf8E4M3FN>, %s: tensor<2x3xf32>) {
  // expected-error @+1 {{'lm.fp8_matmul' op expects weight of rank 2, got 'tensor<300xf8E4M3FN>'}}
  %r = lm.fp8_matmul %x, %w, %s {block_size = array<i64: 128, 128>} : (tensor<4x300xbf16>, tensor<300xf8E4M3FN>, tensor<2x3xf32>) -> tensor<4x200xbf16>
  return
}

// -----

// Tests that lm.fp8_matmul rejects a result whose last dim differs from the weight's N.
func.func @fp8_matmul_result_n(%x: tensor<4x300xbf16>, %w: tensor<200x300xf8E4M3FN>, %s: tensor<2x3xf32>) {
  // expected-error @+1 {{'lm.fp8_matmul' op expects result dim -1 (300) to equal weight dim 0 (200)}}
  %r = lm.fp8_matmul %x, %w, %s {block_size = array<i64: 128, 128>} : (tensor<4x300xbf16>, tensor<200x300xf8E4M3FN>, tensor<2x3xf32>) -> tensor<4x300xbf16>
  return
}

// -----

// Tests that lm.fp8_matmul rejects a block_size with one entry.
func.func @fp8_matmul_block_size_len(%x: tensor<4x300xbf16>, %w: tensor<200x300xf8E4M3FN>, %s: tensor<2x3xf32>) {
  // expected-error @+1 {{'lm.fp8_matmul' op expects block_size of two positive sizes [bn, bk]}}
  %r = lm.fp8_matmul %x, %w, %s {block_size = array<i64: 128>} : (tensor<4x300xbf16>, tensor<200x300xf8E4M3FN>, tensor<2x3xf32>) -> tensor<4x200xbf16>
  return
}

// -----

// Tests that lm.fp8_matmul rejects a zero block size.
func.func @fp8_matmul_block_size_zero(%x: tensor<4x300xbf16>, %w: tensor<200x300xf8E4M3FN>, %s: tensor<2x3xf32>) {
  // expected-error @+1 {{'lm.fp8_matmul' op expects block_size of two positive sizes [bn, bk]}}
  %r = lm.fp8_matmul %x, %w, %s {block_size = array<i64: 128, 0>} : (tensor<4x300xbf16>, tensor<200x300xf8E4M3FN>, tensor<2x3xf32>) -> tensor<4x200xbf16>
  return
}

// -----

// Tests that lm.fp8_matmul rejects a negative block size.
func.func @fp8_matmul_block_size_negative(%x: tensor<4x300xbf16>, %w: tensor<200x300xf8E4M3FN>, %s: tensor<2x3xf32>) {
  // expected-error @+1 {{'lm.fp8_matmul' op expects block_size of two positive sizes [bn, bk]}}
  %r = lm.fp8_matmul %x, %w, %s {block_size = array<i64: -128, 128>} : (tensor<4x300xbf16>, tensor<200x300xf8E4M3FN>, tensor<2x3xf32>) -> tensor<4x200xbf16>
  return
}

// -----

// Tests that lm.fp8_matmul rejects a scale_inv that is not rank 2.
func.func @fp8_matmul_scale_rank(%x: tensor<4x300xbf16>, %w: tensor<200x300xf8E4M3FN>, %s: tensor<6xf32>) {
  // expected-error @+1 {{'lm.fp8_matmul' op expects scale_inv of rank 2, got 'tensor<6xf32>'}}
  %r = lm.fp8_matmul %x, %w, %s {block_size = array<i64: 128, 128>} : (tensor<4x300xbf16>, tensor<200x300xf8E4M3FN>, tensor<6xf32>) -> tensor<4x200xbf16>
  return
}

// -----

// Tests that lm.fp8_matmul rejects a scale_inv whose rows are not ceil(N / bn).
func.func @fp8_matmul_scale_rows(%x: tensor<4x300xbf16>, %w: tensor<200x300xf8E4M3FN>, %s: tensor<1x3xf32>) {
  // expected-error @+1 {{'lm.fp8_matmul' op expects scale_inv dim 0 to be 2 (weight dim divided by the block size, rounded up), got 1}}
  %r = lm.fp8_matmul %x, %w, %s {block_size = array<i64: 128, 128>} : (tensor<4x300xbf16>, tensor<200x300xf8E4M3FN>, tensor<1x3xf32>) -> tensor<4x200xbf16>
  return
}

// -----

// Tests that lm.fp8_matmul rejects a scale_inv whose columns are not ceil(K / bk).
func.func @fp8_matmul_scale_cols(%x: tensor<4x300xbf16>, %w: tensor<200x300xf8E4M3FN>, %s: tensor<2x2xf32>) {
  // expected-error @+1 {{'lm.fp8_matmul' op expects scale_inv dim 1 to be 3 (weight dim divided by the block size, rounded up), got 2}}
  %r = lm.fp8_matmul %x, %w, %s {block_size = array<i64: 128, 128>} : (tensor<4x300xbf16>, tensor<200x300xf8E4M3FN>, tensor<2x2xf32>) -> tensor<4x200xbf16>
  return
}

// -----

// Tests that lm.fp8_matmul rejects a bf16 weight (ODS: f8E4M3FN).
func.func @fp8_matmul_ods_weight_bf16(%x: tensor<4x300xbf16>, %w: tensor<200x300xbf16>, %s: tensor<2x3xf32>) {
  // expected-error @+1 {{'lm.fp8_matmul' op operand #1 must be ranked tensor of f8E4M3FN type values, but got 'tensor<200x300xbf16>'}}
  %r = lm.fp8_matmul %x, %w, %s {block_size = array<i64: 128, 128>} : (tensor<4x300xbf16>, tensor<200x300xbf16>, tensor<2x3xf32>) -> tensor<4x200xbf16>
  return
}

// -----

// Tests that lm.fp8_matmul rejects an f8E5M2 weight (ODS: f8E4M3FN).
func.func @fp8_matmul_ods_weight_e5m2(%x: tensor<4x300xbf16>, %w: tensor<200x300xf8E5M2>, %s: tensor<2x3xf32>) {
  // expected-error @+1 {{'lm.fp8_matmul' op operand #1 must be ranked tensor of f8E4M3FN type values, but got 'tensor<200x300xf8E5M2>'}}
  %r = lm.fp8_matmul %x, %w, %s {block_size = array<i64: 128, 128>} : (tensor<4x300xbf16>, tensor<200x300xf8E5M2>, tensor<2x3xf32>) -> tensor<4x200xbf16>
  return
}

// -----

// Tests that lm.fp8_matmul rejects a bf16 scale_inv (ODS: f32).
func.func @fp8_matmul_ods_scale_bf16(%x: tensor<4x300xbf16>, %w: tensor<200x300xf8E4M3FN>, %s: tensor<2x3xbf16>) {
  // expected-error @+1 {{'lm.fp8_matmul' op operand #2 must be ranked tensor of 32-bit float values, but got 'tensor<2x3xbf16>'}}
  %r = lm.fp8_matmul %x, %w, %s {block_size = array<i64: 128, 128>} : (tensor<4x300xbf16>, tensor<200x300xf8E4M3FN>, tensor<2x3xbf16>) -> tensor<4x200xbf16>
  return
}

// -----

// Tests that lm.fp8_matmul rejects a block_size that is not an i64 array (ODS).
func.func @fp8_matmul_ods_block_size_kind(%x: tensor<4x300xbf16>, %w: tensor<200x300xf8E4M3FN>, %s: tensor<2x3xf32>) {
  // expected-error @+1 {{'lm.fp8_matmul' op attribute 'block_size' failed to satisfy constraint: i64 dense array attribute}}
  %r = lm.fp8_matmul %x, %w, %s {block_size = array<i32: 128, 128>} : (tensor<4x300xbf16>, tensor<200x300xf8E4M3FN>, tensor<2x3xf32>) -> tensor<4x200xbf16>
  return
}

// -----

// Tests that lm.mxfp4_expert_matmul rejects a weight that is not rank 3 ([E, N, K]).
func.func @mxfp4_weight_rank(%x: tensor<4x64xbf16>, %w: tensor<128x64xf4E2M1FN>, %s: tensor<8x128x2xf8E8M0FNU>, %idx: tensor<4x2xi32>) {
  // expected-error @+1 {{'lm.mxfp4_expert_matmul' op expects weight of rank 3, got 'tensor<128x64xf4E2M1FN>'}}
  %r = lm.mxfp4_expert_matmul %x, %w, %s, %idx : (tensor<4x64xbf16>, tensor<128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>, tensor<4x2xi32>) -> tensor<4x2x128xf32>
  return
}

// -----

// Tests that lm.mxfp4_expert_matmul rejects scales that are not rank 3.
func.func @mxfp4_scales_rank(%x: tensor<4x64xbf16>, %w: tensor<8x128x64xf4E2M1FN>, %s: tensor<8x256xf8E8M0FNU>, %idx: tensor<4x2xi32>) {
  // expected-error @+1 {{'lm.mxfp4_expert_matmul' op expects scales of rank 3, got 'tensor<8x256xf8E8M0FNU>'}}
  %r = lm.mxfp4_expert_matmul %x, %w, %s, %idx : (tensor<4x64xbf16>, tensor<8x128x64xf4E2M1FN>, tensor<8x256xf8E8M0FNU>, tensor<4x2xi32>) -> tensor<4x2x128xf32>
  return
}

// -----

// Tests that lm.mxfp4_expert_matmul rejects indices that are not rank 2 ([T, k]).
func.func @mxfp4_indices_rank(%x: tensor<4x64xbf16>, %w: tensor<8x128x64xf4E2M1FN>, %s: tensor<8x128x2xf8E8M0FNU>, %idx: tensor<4xi32>) {
  // expected-error @+1 {{'lm.mxfp4_expert_matmul' op expects indices of rank 2, got 'tensor<4xi32>'}}
  %r = lm.mxfp4_expert_matmul %x, %w, %s, %idx : (tensor<4x64xbf16>, tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>, tensor<4xi32>) -> tensor<4x2x128xf32>
  return
}

// -----

// Tests that lm.mxfp4_expert_matmul rejects a K that is not a multiple of the MXFP4 block (32).
func.func @mxfp4_k_block(%x: tensor<4x48xbf16>, %w: tensor<8x128x48xf4E2M1FN>, %s: tensor<8x128x2xf8E8M0FNU>, %idx: tensor<4x2xi32>) {
  // expected-error @+1 {{'lm.mxfp4_expert_matmul' op expects the reduction dim K to be a multiple of the MXFP4 block of 32, got 48}}
  %r = lm.mxfp4_expert_matmul %x, %w, %s, %idx : (tensor<4x48xbf16>, tensor<8x128x48xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>, tensor<4x2xi32>) -> tensor<4x2x128xf32>
  return
}

// -----

// Tests that lm.mxfp4_expert_matmul rejects scales whose expert count differs from the weight's.
func.func @mxfp4_scales_experts(%x: tensor<4x64xbf16>, %w: tensor<8x128x64xf4E2M1FN>, %s: tensor<4x128x2xf8E8M0FNU>, %idx: tensor<4x2xi32>) {
  // expected-error @+1 {{'lm.mxfp4_expert_matmul' op expects scales dim 0 (4) to equal weight dim 0 (8)}}
  %r = lm.mxfp4_expert_matmul %x, %w, %s, %idx : (tensor<4x64xbf16>, tensor<8x128x64xf4E2M1FN>, tensor<4x128x2xf8E8M0FNU>, tensor<4x2xi32>) -> tensor<4x2x128xf32>
  return
}

// -----

// Tests that lm.mxfp4_expert_matmul rejects scales whose N differs from the weight's.
func.func @mxfp4_scales_n(%x: tensor<4x64xbf16>, %w: tensor<8x128x64xf4E2M1FN>, %s: tensor<8x64x2xf8E8M0FNU>, %idx: tensor<4x2xi32>) {
  // expected-error @+1 {{'lm.mxfp4_expert_matmul' op expects scales dim 1 (64) to equal weight dim 1 (128)}}
  %r = lm.mxfp4_expert_matmul %x, %w, %s, %idx : (tensor<4x64xbf16>, tensor<8x128x64xf4E2M1FN>, tensor<8x64x2xf8E8M0FNU>, tensor<4x2xi32>) -> tensor<4x2x128xf32>
  return
}

// -----

// Tests that lm.mxfp4_expert_matmul rejects scales with other than one scale per 32 weights along K.
func.func @mxfp4_scales_k(%x: tensor<4x64xbf16>, %w: tensor<8x128x64xf4E2M1FN>, %s: tensor<8x128x4xf8E8M0FNU>, %idx: tensor<4x2xi32>) {
  // expected-error @+1 {{'lm.mxfp4_expert_matmul' op expects scales dim 2 to be 2 (one scale per 32 weights along K), got 4}}
  %r = lm.mxfp4_expert_matmul %x, %w, %s, %idx : (tensor<4x64xbf16>, tensor<8x128x64xf4E2M1FN>, tensor<8x128x4xf8E8M0FNU>, tensor<4x2xi32>) -> tensor<4x2x128xf32>
  return
}

// -----

// Tests that lm.mxfp4_expert_matmul rejects an input of rank other than 2 or 3.
func.func @mxfp4_input_rank(%x: tensor<64xbf16>, %w: tensor<8x128x64xf4E2M1FN>, %s: tensor<8x128x2xf8E8M0FNU>, %idx: tensor<4x2xi32>) {
  // expected-error @+1 {{'lm.mxfp4_expert_matmul' op expects input of rank 2 [T, K] or 3 [T, k, K], got 'tensor<64xbf16>'}}
  %r = lm.mxfp4_expert_matmul %x, %w, %s, %idx : (tensor<64xbf16>, tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>, tensor<4x2xi32>) -> tensor<4x2x128xf32>
  return
}

// -----

// Tests that lm.mxfp4_expert_matmul rejects a rank-4 input.
func.func @mxfp4_input_rank4(%x: tensor<4x2x1x64xbf16>, %w: tensor<8x128x64xf4E2M1FN>, %s: tensor<8x128x2xf8E8M0FNU>, %idx: tensor<4x2xi32>) {
  // expected-error @+1 {{'lm.mxfp4_expert_matmul' op expects input of rank 2 [T, K] or 3 [T, k, K], got 'tensor<4x2x1x64xbf16>'}}
  %r = lm.mxfp4_expert_matmul %x, %w, %s, %idx : (tensor<4x2x1x64xbf16>, tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>, tensor<4x2xi32>) -> tensor<4x2x128xf32>
  return
}

// -----

// Tests that lm.mxfp4_expert_matmul rejects an input whose token count differs from the indices'.
func.func @mxfp4_input_tokens(%x: tensor<5x64xbf16>, %w: tensor<8x128x64xf4E2M1FN>, %s: tensor<8x128x2xf8E8M0FNU>, %idx: tensor<4x2xi32>) {
  // expected-error @+1 {{'lm.mxfp4_expert_matmul' op expects input dim 0 (5) to equal indices dim 0 (4)}}
  %r = lm.mxfp4_expert_matmul %x, %w, %s, %idx : (tensor<5x64xbf16>, tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>, tensor<4x2xi32>) -> tensor<4x2x128xf32>
  return
}

// -----

// Tests that lm.mxfp4_expert_matmul rejects a per-slot input whose slot count differs from the indices'.
func.func @mxfp4_input_slots(%x: tensor<4x3x64xbf16>, %w: tensor<8x128x64xf4E2M1FN>, %s: tensor<8x128x2xf8E8M0FNU>, %idx: tensor<4x2xi32>) {
  // expected-error @+1 {{'lm.mxfp4_expert_matmul' op expects input dim 1 (3) to equal indices dim 1 (2)}}
  %r = lm.mxfp4_expert_matmul %x, %w, %s, %idx : (tensor<4x3x64xbf16>, tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>, tensor<4x2xi32>) -> tensor<4x2x128xf32>
  return
}

// -----

// Tests that lm.mxfp4_expert_matmul rejects an input whose last dim differs from the weight's K.
func.func @mxfp4_input_k(%x: tensor<4x32xbf16>, %w: tensor<8x128x64xf4E2M1FN>, %s: tensor<8x128x2xf8E8M0FNU>, %idx: tensor<4x2xi32>) {
  // expected-error @+1 {{'lm.mxfp4_expert_matmul' op expects input dim -1 (32) to equal weight dim 2 (64)}}
  %r = lm.mxfp4_expert_matmul %x, %w, %s, %idx : (tensor<4x32xbf16>, tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>, tensor<4x2xi32>) -> tensor<4x2x128xf32>
  return
}

// -----

// Tests that lm.mxfp4_expert_matmul rejects a bias that is not rank 2 ([E, N]).
func.func @mxfp4_bias_rank(%x: tensor<4x64xbf16>, %w: tensor<8x128x64xf4E2M1FN>, %s: tensor<8x128x2xf8E8M0FNU>, %idx: tensor<4x2xi32>, %b: tensor<128xbf16>) {
  // expected-error @+1 {{'lm.mxfp4_expert_matmul' op expects bias of rank 2, got 'tensor<128xbf16>'}}
  %r = lm.mxfp4_expert_matmul %x, %w, %s, %idx bias %b : (tensor<4x64xbf16>, tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>, tensor<4x2xi32>, tensor<128xbf16>) -> tensor<4x2x128xf32>
  return
}

// -----

// Tests that lm.mxfp4_expert_matmul rejects a bias whose expert count differs from the weight's.
func.func @mxfp4_bias_experts(%x: tensor<4x64xbf16>, %w: tensor<8x128x64xf4E2M1FN>, %s: tensor<8x128x2xf8E8M0FNU>, %idx: tensor<4x2xi32>, %b: tensor<1x128xbf16>) {
  // expected-error @+1 {{'lm.mxfp4_expert_matmul' op expects bias dim 0 (1) to equal weight dim 0 (8)}}
  %r = lm.mxfp4_expert_matmul %x, %w, %s, %idx bias %b : (tensor<4x64xbf16>, tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>, tensor<4x2xi32>, tensor<1x128xbf16>) -> tensor<4x2x128xf32>
  return
}

// -----

// Tests that lm.mxfp4_expert_matmul rejects a bias whose N differs from the weight's.
func.func @mxfp4_bias_n(%x: tensor<4x64xbf16>, %w: tensor<8x128x64xf4E2M1FN>, %s: tensor<8x128x2xf8E8M0FNU>, %idx: tensor<4x2xi32>, %b: tensor<8x64xbf16>) {
  // expected-error @+1 {{'lm.mxfp4_expert_matmul' op expects bias dim 1 (64) to equal weight dim 1 (128)}}
  %r = lm.mxfp4_expert_matmul %x, %w, %s, %idx bias %b : (tensor<4x64xbf16>, tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>, tensor<4x2xi32>, tensor<8x64xbf16>) -> tensor<4x2x128xf32>
  return
}

// -----

// Tests that lm.mxfp4_expert_matmul rejects routing weights whose shape differs from the indices'.
func.func @mxfp4_routing_shape(%x: tensor<4x64xbf16>, %w: tensor<8x128x64xf4E2M1FN>, %s: tensor<8x128x2xf8E8M0FNU>, %idx: tensor<4x2xi32>, %rw: tensor<4x3xf32>) {
  // expected-error @+1 {{'lm.mxfp4_expert_matmul' op expects weights dim 1 (3) to equal indices dim 1 (2)}}
  %r = lm.mxfp4_expert_matmul %x, %w, %s, %idx weights %rw : (tensor<4x64xbf16>, tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>, tensor<4x2xi32>, tensor<4x3xf32>) -> tensor<4x128xf32>
  return
}

// -----

// Tests that lm.mxfp4_expert_matmul rejects routing weights whose rank differs from the indices'.
func.func @mxfp4_routing_rank(%x: tensor<4x64xbf16>, %w: tensor<8x128x64xf4E2M1FN>, %s: tensor<8x128x2xf8E8M0FNU>, %idx: tensor<4x2xi32>, %rw: tensor<8xf32>) {
  // expected-error @+1 {{'lm.mxfp4_expert_matmul' op expects weights and indices of the same shape, got 'tensor<8xf32>' and 'tensor<4x2xi32>'}}
  %r = lm.mxfp4_expert_matmul %x, %w, %s, %idx weights %rw : (tensor<4x64xbf16>, tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>, tensor<4x2xi32>, tensor<8xf32>) -> tensor<4x128xf32>
  return
}

// -----

// Tests that lm.mxfp4_expert_matmul with routing weights rejects a per-slot [T, k, N] result.
func.func @mxfp4_routed_result_rank(%x: tensor<4x64xbf16>, %w: tensor<8x128x64xf4E2M1FN>, %s: tensor<8x128x2xf8E8M0FNU>, %idx: tensor<4x2xi32>, %rw: tensor<4x2xf32>) {
  // expected-error @+1 {{'lm.mxfp4_expert_matmul' op expects result of rank 2, got 'tensor<4x2x128xf32>'}}
  %r = lm.mxfp4_expert_matmul %x, %w, %s, %idx weights %rw : (tensor<4x64xbf16>, tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>, tensor<4x2xi32>, tensor<4x2xf32>) -> tensor<4x2x128xf32>
  return
}

// -----

// Tests that lm.mxfp4_expert_matmul without routing weights rejects a summed [T, N] result.
func.func @mxfp4_unrouted_result_rank(%x: tensor<4x64xbf16>, %w: tensor<8x128x64xf4E2M1FN>, %s: tensor<8x128x2xf8E8M0FNU>, %idx: tensor<4x2xi32>) {
  // expected-error @+1 {{'lm.mxfp4_expert_matmul' op expects result of rank 3, got 'tensor<4x128xf32>'}}
  %r = lm.mxfp4_expert_matmul %x, %w, %s, %idx : (tensor<4x64xbf16>, tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>, tensor<4x2xi32>) -> tensor<4x128xf32>
  return
}

// -----

// Tests that lm.mxfp4_expert_matmul rejects a per-slot result whose slot count differs from the indices'.
func.func @mxfp4_result_slots(%x: tensor<4x64xbf16>, %w: tensor<8x128x64xf4E2M1FN>, %s: tensor<8x128x2xf8E8M0FNU>, %idx: tensor<4x2xi32>) {
  // expected-error @+1 {{'lm.mxfp4_expert_matmul' op expects result dim 1 (1) to equal indices dim 1 (2)}}
  %r = lm.mxfp4_expert_matmul %x, %w, %s, %idx : (tensor<4x64xbf16>, tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>, tensor<4x2xi32>) -> tensor<4x1x128xf32>
  return
}

// -----

// Tests that lm.mxfp4_expert_matmul rejects a result whose token count differs from the indices'.
func.func @mxfp4_result_tokens(%x: tensor<4x64xbf16>, %w: tensor<8x128x64xf4E2M1FN>, %s: tensor<8x128x2xf8E8M0FNU>, %idx: tensor<4x2xi32>, %rw: tensor<4x2xf32>) {
  // expected-error @+1 {{'lm.mxfp4_expert_matmul' op expects result dim 0 (2) to equal indices dim 0 (4)}}
  %r = lm.mxfp4_expert_matmul %x, %w, %s, %idx weights %rw : (tensor<4x64xbf16>, tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>, tensor<4x2xi32>, tensor<4x2xf32>) -> tensor<2x128xf32>
  return
}

// -----

// Tests that lm.mxfp4_expert_matmul rejects a result whose last dim differs from the weight's N.
func.func @mxfp4_result_n(%x: tensor<4x64xbf16>, %w: tensor<8x128x64xf4E2M1FN>, %s: tensor<8x128x2xf8E8M0FNU>, %idx: tensor<4x2xi32>) {
  // expected-error @+1 {{'lm.mxfp4_expert_matmul' op expects result dim -1 (64) to equal weight dim 1 (128)}}
  %r = lm.mxfp4_expert_matmul %x, %w, %s, %idx : (tensor<4x64xbf16>, tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>, tensor<4x2xi32>) -> tensor<4x2x64xf32>
  return
}

// -----

// Tests that lm.mxfp4_expert_matmul rejects i64 indices (ODS: i32).
func.func @mxfp4_ods_indices_i64(%x: tensor<4x64xbf16>, %w: tensor<8x128x64xf4E2M1FN>, %s: tensor<8x128x2xf8E8M0FNU>, %idx: tensor<4x2xi64>) {
  // expected-error @+1 {{'lm.mxfp4_expert_matmul' op operand #3 must be ranked tensor of 32-bit signless integer values, but got 'tensor<4x2xi64>'}}
  %r = lm.mxfp4_expert_matmul %x, %w, %s, %idx : (tensor<4x64xbf16>, tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>, tensor<4x2xi64>) -> tensor<4x2x128xf32>
  return
}

// -----

// Tests that lm.mxfp4_expert_matmul rejects an FP8 weight (ODS: f4E2M1FN).
func.func @mxfp4_ods_weight_fp8(%x: tensor<4x64xbf16>, %w: tensor<8x128x64xf8E4M3FN>, %s: tensor<8x128x2xf8E8M0FNU>, %idx: tensor<4x2xi32>) {
  // expected-error @+1 {{'lm.mxfp4_expert_matmul' op operand #1 must be ranked tensor of f4E2M1FN type values, but got 'tensor<8x128x64xf8E4M3FN>'}}
  %r = lm.mxfp4_expert_matmul %x, %w, %s, %idx : (tensor<4x64xbf16>, tensor<8x128x64xf8E4M3FN>, tensor<8x128x2xf8E8M0FNU>, tensor<4x2xi32>) -> tensor<4x2x128xf32>
  return
}

// -----

// Tests that lm.mxfp4_expert_matmul rejects f8E4M3FN scales (ODS: f8E8M0FNU).
func.func @mxfp4_ods_scales_fp8(%x: tensor<4x64xbf16>, %w: tensor<8x128x64xf4E2M1FN>, %s: tensor<8x128x2xf8E4M3FN>, %idx: tensor<4x2xi32>) {
  // expected-error @+1 {{'lm.mxfp4_expert_matmul' op operand #2 must be ranked tensor of f8E8M0FNU type values, but got 'tensor<8x128x2xf8E4M3FN>'}}
  %r = lm.mxfp4_expert_matmul %x, %w, %s, %idx : (tensor<4x64xbf16>, tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E4M3FN>, tensor<4x2xi32>) -> tensor<4x2x128xf32>
  return
}

// -----

// Tests that lm.mxfp4_expert_matmul rejects bf16 routing weights (ODS: f32).
func.func @mxfp4_ods_routing_bf16(%x: tensor<4x64xbf16>, %w: tensor<8x128x64xf4E2M1FN>, %s: tensor<8x128x2xf8E8M0FNU>, %idx: tensor<4x2xi32>, %rw: tensor<4x2xbf16>) {
  // expected-error @+1 {{'lm.mxfp4_expert_matmul' op operand #4 must be ranked tensor of 32-bit float values, but got 'tensor<4x2xbf16>'}}
  %r = lm.mxfp4_expert_matmul %x, %w, %s, %idx weights %rw : (tensor<4x64xbf16>, tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>, tensor<4x2xi32>, tensor<4x2xbf16>) -> tensor<4x128xf32>
  return
}

// -----

// Tests that lm.moe_route's results hold the shared experts' slots too.
func.func @moe_route_shared_slots(%logits: tensor<4x16xf32>) {
  // expected-error @+1 {{'lm.moe_route' op expects indices dim 1 to be 3 (top_k + shared_experts), got 2}}
  %r:2 = lm.moe_route %logits sigmoid {top_k = 2 : i64, shared_experts = 1 : i64} : (tensor<4x16xf32>) -> (tensor<4x2xi32>, tensor<4x2xf32>)
  return
}

// -----

// Tests that lm.moe_route rejects a negative count of shared experts.
func.func @moe_route_shared_negative(%logits: tensor<4x16xf32>) {
  // expected-error @+1 {{'lm.moe_route' op expects shared_experts >= 0, got -1}}
  %r:2 = lm.moe_route %logits sigmoid {top_k = 2 : i64, shared_experts = -1 : i64} : (tensor<4x16xf32>) -> (tensor<4x1xi32>, tensor<4x1xf32>)
  return
}

// -----

// Tests that lm.moe_route rejects logits that are not rank 2 ([T, E]).
func.func @moe_route_logits_rank(%logits: tensor<16xf32>) {
  // expected-error @+1 {{'lm.moe_route' op expects logits of rank 2, got 'tensor<16xf32>'}}
  %r:2 = lm.moe_route %logits sigmoid {top_k = 2 : i64} : (tensor<16xf32>) -> (tensor<4x2xi32>, tensor<4x2xf32>)
  return
}

// -----

// Tests that lm.moe_route rejects a bias that is not rank 1.
func.func @moe_route_bias_rank(%logits: tensor<4x16xf32>, %b: tensor<1x16xf32>) {
  // expected-error @+1 {{'lm.moe_route' op expects bias of rank 1, got 'tensor<1x16xf32>'}}
  %r:2 = lm.moe_route %logits bias %b sigmoid {top_k = 2 : i64} : (tensor<4x16xf32>, tensor<1x16xf32>) -> (tensor<4x2xi32>, tensor<4x2xf32>)
  return
}

// -----

// Tests that lm.moe_route rejects a bias whose size differs from the expert count.
func.func @moe_route_bias_dim(%logits: tensor<4x16xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'lm.moe_route' op expects bias dim 0 (8) to equal logits dim 1 (16)}}
  %r:2 = lm.moe_route %logits bias %b sigmoid {top_k = 2 : i64} : (tensor<4x16xf32>, tensor<8xf32>) -> (tensor<4x2xi32>, tensor<4x2xf32>)
  return
}

// -----

// Tests that lm.moe_route rejects top_k = 0.
func.func @moe_route_top_k_zero(%logits: tensor<4x16xf32>) {
  // expected-error @+1 {{'lm.moe_route' op expects top_k > 0, got 0}}
  %r:2 = lm.moe_route %logits sigmoid {top_k = 0 : i64} : (tensor<4x16xf32>) -> (tensor<4x0xi32>, tensor<4x0xf32>)
  return
}

// -----

// Tests that lm.moe_route rejects a negative top_k.
func.func @moe_route_top_k_negative(%logits: tensor<4x16xf32>) {
  // expected-error @+1 {{'lm.moe_route' op expects top_k > 0, got -2}}
  %r:2 = lm.moe_route %logits sigmoid {top_k = -2 : i64} : (tensor<4x16xf32>) -> (tensor<4x2xi32>, tensor<4x2xf32>)
  return
}

// -----

// Tests that lm.moe_route rejects num_groups = 0.
func.func @moe_route_num_groups_zero(%logits: tensor<4x16xf32>) {
  // expected-error @+1 {{'lm.moe_route' op expects num_groups > 0, got 0}}
  %r:2 = lm.moe_route %logits sigmoid {top_k = 2 : i64, num_groups = 0 : i64, top_k_groups = 0 : i64} : (tensor<4x16xf32>) -> (tensor<4x2xi32>, tensor<4x2xf32>)
  return
}

// -----

// Tests that lm.moe_route rejects top_k_groups = 0.
func.func @moe_route_top_k_groups_zero(%logits: tensor<4x16xf32>) {
  // expected-error @+1 {{'lm.moe_route' op expects 0 < top_k_groups <= num_groups (4), got 0}}
  %r:2 = lm.moe_route %logits sigmoid {top_k = 2 : i64, num_groups = 4 : i64, top_k_groups = 0 : i64} : (tensor<4x16xf32>) -> (tensor<4x2xi32>, tensor<4x2xf32>)
  return
}

// -----

// Tests that lm.moe_route rejects top_k_groups > num_groups.
func.func @moe_route_top_k_groups_too_many(%logits: tensor<4x16xf32>) {
  // expected-error @+1 {{'lm.moe_route' op expects 0 < top_k_groups <= num_groups (4), got 5}}
  %r:2 = lm.moe_route %logits sigmoid {top_k = 2 : i64, num_groups = 4 : i64, top_k_groups = 5 : i64} : (tensor<4x16xf32>) -> (tensor<4x2xi32>, tensor<4x2xf32>)
  return
}

// -----

// Tests that lm.moe_route rejects group-limited routing with softmax scores.
func.func @moe_route_groups_softmax(%logits: tensor<4x16xf32>) {
  // expected-error @+1 {{'lm.moe_route' op expects group-limited routing only with sigmoid scores}}
  %r:2 = lm.moe_route %logits softmax {top_k = 2 : i64, num_groups = 4 : i64, top_k_groups = 2 : i64} : (tensor<4x16xf32>) -> (tensor<4x2xi32>, tensor<4x2xf32>)
  return
}

// -----

// Tests that lm.moe_route rejects group-limited routing with softmax_topk scores.
func.func @moe_route_groups_softmax_topk(%logits: tensor<4x16xf32>) {
  // expected-error @+1 {{'lm.moe_route' op expects group-limited routing only with sigmoid scores}}
  %r:2 = lm.moe_route %logits softmax_topk {top_k = 2 : i64, num_groups = 2 : i64, top_k_groups = 1 : i64} : (tensor<4x16xf32>) -> (tensor<4x2xi32>, tensor<4x2xf32>)
  return
}

// -----

// Tests that lm.moe_route rejects an expert count that does not split into num_groups equal groups.
func.func @moe_route_groups_split(%logits: tensor<4x10xf32>) {
  // expected-error @+1 {{'lm.moe_route' op expects 10 experts to split into 4 equal groups}}
  %r:2 = lm.moe_route %logits sigmoid {top_k = 2 : i64, num_groups = 4 : i64, top_k_groups = 2 : i64} : (tensor<4x10xf32>) -> (tensor<4x2xi32>, tensor<4x2xf32>)
  return
}

// -----

// Tests that lm.moe_route rejects groups of a single expert (a group scores by its top 2).
func.func @moe_route_group_size(%logits: tensor<4x16xf32>) {
  // expected-error @+1 {{'lm.moe_route' op expects at least 2 experts per group (a group scores by its top 2), got 1}}
  %r:2 = lm.moe_route %logits sigmoid {top_k = 2 : i64, num_groups = 16 : i64, top_k_groups = 4 : i64} : (tensor<4x16xf32>) -> (tensor<4x2xi32>, tensor<4x2xf32>)
  return
}

// -----

// Tests that lm.moe_route rejects a top_k larger than the experts in the kept groups.
func.func @moe_route_top_k_kept_groups(%logits: tensor<4x16xf32>) {
  // expected-error @+1 {{'lm.moe_route' op expects top_k (9) <= the 8 experts in the kept groups}}
  %r:2 = lm.moe_route %logits sigmoid {top_k = 9 : i64, num_groups = 4 : i64, top_k_groups = 2 : i64} : (tensor<4x16xf32>) -> (tensor<4x9xi32>, tensor<4x9xf32>)
  return
}

// -----

// Tests that lm.moe_route rejects a top_k larger than the expert count.
func.func @moe_route_top_k_experts(%logits: tensor<4x16xf32>) {
  // expected-error @+1 {{'lm.moe_route' op expects top_k (17) <= the 16 experts in the kept groups}}
  %r:2 = lm.moe_route %logits softmax_topk {top_k = 17 : i64} : (tensor<4x16xf32>) -> (tensor<4x17xi32>, tensor<4x17xf32>)
  return
}

// -----

// Tests that lm.moe_route rejects indices that are not rank 2.
func.func @moe_route_indices_rank(%logits: tensor<4x16xf32>) {
  // expected-error @+1 {{'lm.moe_route' op expects indices of rank 2, got 'tensor<8xi32>'}}
  %r:2 = lm.moe_route %logits sigmoid {top_k = 2 : i64} : (tensor<4x16xf32>) -> (tensor<8xi32>, tensor<4x2xf32>)
  return
}

// -----

// Tests that lm.moe_route rejects indices whose token count differs from the logits'.
func.func @moe_route_indices_tokens(%logits: tensor<4x16xf32>) {
  // expected-error @+1 {{'lm.moe_route' op expects indices dim 0 (3) to equal logits dim 0 (4)}}
  %r:2 = lm.moe_route %logits sigmoid {top_k = 2 : i64} : (tensor<4x16xf32>) -> (tensor<3x2xi32>, tensor<4x2xf32>)
  return
}

// -----

// Tests that lm.moe_route rejects indices with other than top_k columns.
func.func @moe_route_indices_top_k(%logits: tensor<4x16xf32>) {
  // expected-error @+1 {{'lm.moe_route' op expects indices dim 1 to be 2 (top_k), got 3}}
  %r:2 = lm.moe_route %logits sigmoid {top_k = 2 : i64} : (tensor<4x16xf32>) -> (tensor<4x3xi32>, tensor<4x2xf32>)
  return
}

// -----

// Tests that lm.moe_route rejects weights that are not rank 2.
func.func @moe_route_weights_rank(%logits: tensor<4x16xf32>) {
  // expected-error @+1 {{'lm.moe_route' op expects weights of rank 2, got 'tensor<4x2x1xf32>'}}
  %r:2 = lm.moe_route %logits sigmoid {top_k = 2 : i64} : (tensor<4x16xf32>) -> (tensor<4x2xi32>, tensor<4x2x1xf32>)
  return
}

// -----

// Tests that lm.moe_route rejects weights whose token count differs from the logits'.
func.func @moe_route_weights_tokens(%logits: tensor<4x16xf32>) {
  // expected-error @+1 {{'lm.moe_route' op expects weights dim 0 (5) to equal logits dim 0 (4)}}
  %r:2 = lm.moe_route %logits sigmoid {top_k = 2 : i64} : (tensor<4x16xf32>) -> (tensor<4x2xi32>, tensor<5x2xf32>)
  return
}

// -----

// Tests that lm.moe_route rejects weights with other than top_k columns.
func.func @moe_route_weights_top_k(%logits: tensor<4x16xf32>) {
  // expected-error @+1 {{'lm.moe_route' op expects weights dim 1 to be 2 (top_k), got 1}}
  %r:2 = lm.moe_route %logits sigmoid {top_k = 2 : i64} : (tensor<4x16xf32>) -> (tensor<4x2xi32>, tensor<4x1xf32>)
  return
}

// -----

// Tests that lm.moe_route rejects i64 indices (ODS: i32).
func.func @moe_route_ods_indices_i64(%logits: tensor<4x16xf32>) {
  // expected-error @+1 {{'lm.moe_route' op result #0 must be ranked tensor of 32-bit signless integer values, but got 'tensor<4x2xi64>'}}
  %r:2 = lm.moe_route %logits sigmoid {top_k = 2 : i64} : (tensor<4x16xf32>) -> (tensor<4x2xi64>, tensor<4x2xf32>)
  return
}

// -----

// Tests that lm.moe_route rejects bf16 weights (ODS: f32).
func.func @moe_route_ods_weights_bf16(%logits: tensor<4x16xf32>) {
  // expected-error @+1 {{'lm.moe_route' op result #1 must be ranked tensor of 32-bit float values, but got 'tensor<4x2xbf16>'}}
  %r:2 = lm.moe_route %logits sigmoid {top_k = 2 : i64} : (tensor<4x16xf32>) -> (tensor<4x2xi32>, tensor<4x2xbf16>)
  return
}

// -----

// Tests that lm.moe_route rejects a bf16 bias (ODS: f32).
func.func @moe_route_ods_bias_bf16(%logits: tensor<4x16xf32>, %b: tensor<16xbf16>) {
  // expected-error @+1 {{'lm.moe_route' op operand #1 must be ranked tensor of 32-bit float values, but got 'tensor<16xbf16>'}}
  %r:2 = lm.moe_route %logits bias %b sigmoid {top_k = 2 : i64} : (tensor<4x16xf32>, tensor<16xbf16>) -> (tensor<4x2xi32>, tensor<4x2xf32>)
  return
}

// -----

// Tests that lm.attention rejects a q that is not rank 3 ([T, Hq, D]).
func.func @attention_q_rank(%q: tensor<4x512xf32>, %k: tensor<6x2x64xf32>, %v: tensor<6x2x32xf32>) {
  // expected-error @+1 {{'lm.attention' op expects q of rank 3, got 'tensor<4x512xf32>'}}
  %r = lm.attention %q, %k, %v causal {scale = 0.125 : f64} : (tensor<4x512xf32>, tensor<6x2x64xf32>, tensor<6x2x32xf32>) -> tensor<4x8x32xf32>
  return
}

// -----

// Tests that lm.attention rejects a k that is not rank 3.
func.func @attention_k_rank(%q: tensor<4x8x64xf32>, %k: tensor<6x128xf32>, %v: tensor<6x2x32xf32>) {
  // expected-error @+1 {{'lm.attention' op expects k of rank 3, got 'tensor<6x128xf32>'}}
  %r = lm.attention %q, %k, %v causal {scale = 0.125 : f64} : (tensor<4x8x64xf32>, tensor<6x128xf32>, tensor<6x2x32xf32>) -> tensor<4x8x32xf32>
  return
}

// -----

// Tests that lm.attention rejects a v that is not rank 3.
func.func @attention_v_rank(%q: tensor<4x8x64xf32>, %k: tensor<6x2x64xf32>, %v: tensor<1x6x2x32xf32>) {
  // expected-error @+1 {{'lm.attention' op expects v of rank 3, got 'tensor<1x6x2x32xf32>'}}
  %r = lm.attention %q, %k, %v causal {scale = 0.125 : f64} : (tensor<4x8x64xf32>, tensor<6x2x64xf32>, tensor<1x6x2x32xf32>) -> tensor<4x8x32xf32>
  return
}

// -----

// Tests that lm.attention rejects a k whose head dim differs from q's.
func.func @attention_k_dim(%q: tensor<4x8x64xf32>, %k: tensor<6x2x32xf32>, %v: tensor<6x2x32xf32>) {
  // expected-error @+1 {{'lm.attention' op expects k dim 2 (32) to equal q dim 2 (64)}}
  %r = lm.attention %q, %k, %v causal {scale = 0.125 : f64} : (tensor<4x8x64xf32>, tensor<6x2x32xf32>, tensor<6x2x32xf32>) -> tensor<4x8x32xf32>
  return
}

// -----

// Tests that lm.attention rejects a v whose key count differs from k's.
func.func @attention_v_keys(%q: tensor<4x8x64xf32>, %k: tensor<6x2x64xf32>, %v: tensor<5x2x32xf32>) {
  // expected-error @+1 {{'lm.attention' op expects v dim 0 (5) to equal k dim 0 (6)}}
  %r = lm.attention %q, %k, %v causal {scale = 0.125 : f64} : (tensor<4x8x64xf32>, tensor<6x2x64xf32>, tensor<5x2x32xf32>) -> tensor<4x8x32xf32>
  return
}

// -----

// Tests that lm.attention rejects a v whose head count differs from k's.
func.func @attention_v_heads(%q: tensor<4x8x64xf32>, %k: tensor<6x2x64xf32>, %v: tensor<6x1x32xf32>) {
  // expected-error @+1 {{'lm.attention' op expects v dim 1 (1) to equal k dim 1 (2)}}
  %r = lm.attention %q, %k, %v causal {scale = 0.125 : f64} : (tensor<4x8x64xf32>, tensor<6x2x64xf32>, tensor<6x1x32xf32>) -> tensor<4x8x32xf32>
  return
}

// -----

// Tests that lm.attention rejects query heads that are not a multiple of the key/value heads.
func.func @attention_gqa_heads(%q: tensor<4x6x64xf32>, %k: tensor<6x4x64xf32>, %v: tensor<6x4x32xf32>) {
  // expected-error @+1 {{'lm.attention' op expects the query heads (6) to be a multiple of the key/value heads (4)}}
  %r = lm.attention %q, %k, %v causal {scale = 0.125 : f64} : (tensor<4x6x64xf32>, tensor<6x4x64xf32>, tensor<6x4x32xf32>) -> tensor<4x6x32xf32>
  return
}

// -----

// Tests that lm.attention rejects zero key/value heads (no division by zero).
func.func @attention_zero_kv_heads(%q: tensor<4x8x64xf32>, %k: tensor<6x0x64xf32>, %v: tensor<6x0x32xf32>) {
  // expected-error @+1 {{'lm.attention' op expects the query heads (8) to be a multiple of the key/value heads (0)}}
  %r = lm.attention %q, %k, %v causal {scale = 0.125 : f64} : (tensor<4x8x64xf32>, tensor<6x0x64xf32>, tensor<6x0x32xf32>) -> tensor<4x8x32xf32>
  return
}

// -----

// Tests that lm.attention rejects sinks that are not rank 1 ([Hq]).
func.func @attention_sinks_rank(%q: tensor<4x8x64xf32>, %k: tensor<6x2x64xf32>, %v: tensor<6x2x32xf32>, %sinks: tensor<8x1xf32>) {
  // expected-error @+1 {{'lm.attention' op expects sinks of rank 1, got 'tensor<8x1xf32>'}}
  %r = lm.attention %q, %k, %v sinks %sinks causal {scale = 0.125 : f64} : (tensor<4x8x64xf32>, tensor<6x2x64xf32>, tensor<6x2x32xf32>, tensor<8x1xf32>) -> tensor<4x8x32xf32>
  return
}

// -----

// Tests that lm.attention rejects sinks with one per KV head instead of one per query head.
func.func @attention_sinks_dim(%q: tensor<4x8x64xf32>, %k: tensor<6x2x64xf32>, %v: tensor<6x2x32xf32>, %sinks: tensor<2xf32>) {
  // expected-error @+1 {{'lm.attention' op expects sinks dim 0 (2) to equal q dim 1 (8)}}
  %r = lm.attention %q, %k, %v sinks %sinks causal {scale = 0.125 : f64} : (tensor<4x8x64xf32>, tensor<6x2x64xf32>, tensor<6x2x32xf32>, tensor<2xf32>) -> tensor<4x8x32xf32>
  return
}

// -----

// Tests that lm.attention rejects q_positions without k_positions.
func.func @attention_q_positions_alone(%q: tensor<4x8x64xf32>, %k: tensor<6x2x64xf32>, %v: tensor<6x2x32xf32>, %qp: tensor<4xi32>) {
  // expected-error @+1 {{'lm.attention' op expects q_positions and k_positions together}}
  %r = lm.attention %q, %k, %v q_positions %qp causal {scale = 0.125 : f64} : (tensor<4x8x64xf32>, tensor<6x2x64xf32>, tensor<6x2x32xf32>, tensor<4xi32>) -> tensor<4x8x32xf32>
  return
}

// -----

// Tests that lm.attention rejects k_positions without q_positions.
func.func @attention_k_positions_alone(%q: tensor<4x8x64xf32>, %k: tensor<6x2x64xf32>, %v: tensor<6x2x32xf32>, %kp: tensor<6xi32>) {
  // expected-error @+1 {{'lm.attention' op expects q_positions and k_positions together}}
  %r = lm.attention %q, %k, %v k_positions %kp causal {scale = 0.125 : f64} : (tensor<4x8x64xf32>, tensor<6x2x64xf32>, tensor<6x2x32xf32>, tensor<6xi32>) -> tensor<4x8x32xf32>
  return
}

// -----

// Tests that lm.attention rejects q_segments without k_segments.
func.func @attention_q_segments_alone(%q: tensor<4x8x64xf32>, %k: tensor<6x2x64xf32>, %v: tensor<6x2x32xf32>, %qs: tensor<4xi32>) {
  // expected-error @+1 {{'lm.attention' op expects q_segments and k_segments together}}
  %r = lm.attention %q, %k, %v q_segments %qs bidirectional {scale = 0.125 : f64} : (tensor<4x8x64xf32>, tensor<6x2x64xf32>, tensor<6x2x32xf32>, tensor<4xi32>) -> tensor<4x8x32xf32>
  return
}

// -----

// Tests that lm.attention rejects k_segments without q_segments.
func.func @attention_k_segments_alone(%q: tensor<4x8x64xf32>, %k: tensor<6x2x64xf32>, %v: tensor<6x2x32xf32>, %ks: tensor<6xi32>) {
  // expected-error @+1 {{'lm.attention' op expects q_segments and k_segments together}}
  %r = lm.attention %q, %k, %v k_segments %ks bidirectional {scale = 0.125 : f64} : (tensor<4x8x64xf32>, tensor<6x2x64xf32>, tensor<6x2x32xf32>, tensor<6xi32>) -> tensor<4x8x32xf32>
  return
}

// -----

// Tests that lm.attention over caches rejects a v that is not rank 4 like k.
func.func @attention_cache_v_rank(%q: tensor<4x8x16xf32>, %k: tensor<2x64x2x16xf32>, %v: tensor<128x2x16xf32>, %p: tensor<4xi32>, %s: tensor<4xi32>) {
  // expected-error @+1 {{'lm.attention' op expects v of rank 4, got 'tensor<128x2x16xf32>'}}
  %r = lm.attention %q, %k, %v q_positions %p q_segments %s causal {scale = 0.25 : f64} : (tensor<4x8x16xf32>, tensor<2x64x2x16xf32>, tensor<128x2x16xf32>, tensor<4xi32>, tensor<4xi32>) -> tensor<4x8x16xf32>
  return
}

// -----

// Tests that lm.attention over caches rejects a v cache of another batch than k's.
func.func @attention_cache_v_batch(%q: tensor<4x8x16xf32>, %k: tensor<2x64x2x16xf32>, %v: tensor<3x64x2x16xf32>, %p: tensor<4xi32>, %s: tensor<4xi32>) {
  // expected-error @+1 {{'lm.attention' op expects v dim 0 (3) to equal k dim 0 (2)}}
  %r = lm.attention %q, %k, %v q_positions %p q_segments %s causal {scale = 0.25 : f64} : (tensor<4x8x16xf32>, tensor<2x64x2x16xf32>, tensor<3x64x2x16xf32>, tensor<4xi32>, tensor<4xi32>) -> tensor<4x8x16xf32>
  return
}

// -----

// Tests that lm.attention over caches rejects a key head dim other than the query's.
func.func @attention_cache_k_dim(%q: tensor<4x8x16xf32>, %k: tensor<2x64x2x32xf32>, %v: tensor<2x64x2x32xf32>, %p: tensor<4xi32>, %s: tensor<4xi32>) {
  // expected-error @+1 {{'lm.attention' op expects k dim 3 (32) to equal q dim 2 (16)}}
  %r = lm.attention %q, %k, %v q_positions %p q_segments %s causal {scale = 0.25 : f64} : (tensor<4x8x16xf32>, tensor<2x64x2x32xf32>, tensor<2x64x2x32xf32>, tensor<4xi32>, tensor<4xi32>) -> tensor<4x8x32xf32>
  return
}

// -----

// Tests that lm.attention over caches rejects query heads that are not a multiple of the cache's KV heads.
func.func @attention_cache_gqa(%q: tensor<4x6x16xf32>, %k: tensor<2x64x4x16xf32>, %v: tensor<2x64x4x16xf32>, %p: tensor<4xi32>, %s: tensor<4xi32>) {
  // expected-error @+1 {{'lm.attention' op expects the query heads (6) to be a multiple of the key/value heads (4)}}
  %r = lm.attention %q, %k, %v q_positions %p q_segments %s causal {scale = 0.25 : f64} : (tensor<4x6x16xf32>, tensor<2x64x4x16xf32>, tensor<2x64x4x16xf32>, tensor<4xi32>, tensor<4xi32>) -> tensor<4x6x16xf32>
  return
}

// -----

// Tests that lm.attention over caches requires each query's batch row (q_segments).
func.func @attention_cache_no_segments(%q: tensor<4x8x16xf32>, %k: tensor<2x64x2x16xf32>, %v: tensor<2x64x2x16xf32>, %p: tensor<4xi32>) {
  // expected-error @+1 {{'lm.attention' op expects q_positions and q_segments (each query's batch row) with [B, S, Hkv, D] caches}}
  %r = lm.attention %q, %k, %v q_positions %p causal {scale = 0.25 : f64} : (tensor<4x8x16xf32>, tensor<2x64x2x16xf32>, tensor<2x64x2x16xf32>, tensor<4xi32>) -> tensor<4x8x16xf32>
  return
}

// -----

// Tests that lm.attention over caches requires each query's position.
func.func @attention_cache_no_positions(%q: tensor<4x8x16xf32>, %k: tensor<2x64x2x16xf32>, %v: tensor<2x64x2x16xf32>, %s: tensor<4xi32>) {
  // expected-error @+1 {{'lm.attention' op expects q_positions and q_segments (each query's batch row) with [B, S, Hkv, D] caches}}
  %r = lm.attention %q, %k, %v q_segments %s causal {scale = 0.25 : f64} : (tensor<4x8x16xf32>, tensor<2x64x2x16xf32>, tensor<2x64x2x16xf32>, tensor<4xi32>) -> tensor<4x8x16xf32>
  return
}

// -----

// Tests that lm.attention over caches rejects key positions: keys sit at their row's positions.
func.func @attention_cache_k_positions(%q: tensor<4x8x16xf32>, %k: tensor<2x64x2x16xf32>, %v: tensor<2x64x2x16xf32>, %p: tensor<4xi32>, %s: tensor<4xi32>, %kp: tensor<64xi32>) {
  // expected-error @+1 {{'lm.attention' op expects no k_positions or k_segments with [B, S, Hkv, D] caches (keys sit at their row's positions)}}
  %r = lm.attention %q, %k, %v q_positions %p k_positions %kp q_segments %s causal {scale = 0.25 : f64} : (tensor<4x8x16xf32>, tensor<2x64x2x16xf32>, tensor<2x64x2x16xf32>, tensor<4xi32>, tensor<64xi32>, tensor<4xi32>) -> tensor<4x8x16xf32>
  return
}

// -----

// Tests that lm.attention rejects q_positions that are not rank 1.
func.func @attention_q_positions_rank(%q: tensor<4x8x64xf32>, %k: tensor<6x2x64xf32>, %v: tensor<6x2x32xf32>, %qp: tensor<4x1xi32>, %kp: tensor<6xi32>) {
  // expected-error @+1 {{'lm.attention' op expects q_positions of rank 1, got 'tensor<4x1xi32>'}}
  %r = lm.attention %q, %k, %v q_positions %qp k_positions %kp causal {scale = 0.125 : f64} : (tensor<4x8x64xf32>, tensor<6x2x64xf32>, tensor<6x2x32xf32>, tensor<4x1xi32>, tensor<6xi32>) -> tensor<4x8x32xf32>
  return
}

// -----

// Tests that lm.attention rejects q_positions whose size differs from q's token count.
func.func @attention_q_positions_dim(%q: tensor<4x8x64xf32>, %k: tensor<6x2x64xf32>, %v: tensor<6x2x32xf32>, %qp: tensor<6xi32>, %kp: tensor<6xi32>) {
  // expected-error @+1 {{'lm.attention' op expects q_positions dim 0 (6) to equal q dim 0 (4)}}
  %r = lm.attention %q, %k, %v q_positions %qp k_positions %kp causal {scale = 0.125 : f64} : (tensor<4x8x64xf32>, tensor<6x2x64xf32>, tensor<6x2x32xf32>, tensor<6xi32>, tensor<6xi32>) -> tensor<4x8x32xf32>
  return
}

// -----

// Tests that lm.attention rejects k_positions that are not rank 1.
func.func @attention_k_positions_rank(%q: tensor<4x8x64xf32>, %k: tensor<6x2x64xf32>, %v: tensor<6x2x32xf32>, %qp: tensor<4xi64>, %kp: tensor<i64>) {
  // expected-error @+1 {{'lm.attention' op expects k_positions of rank 1, got 'tensor<i64>'}}
  %r = lm.attention %q, %k, %v q_positions %qp k_positions %kp causal {scale = 0.125 : f64} : (tensor<4x8x64xf32>, tensor<6x2x64xf32>, tensor<6x2x32xf32>, tensor<4xi64>, tensor<i64>) -> tensor<4x8x32xf32>
  return
}

// -----

// Tests that lm.attention rejects k_positions whose size differs from k's key count.
func.func @attention_k_positions_dim(%q: tensor<4x8x64xf32>, %k: tensor<6x2x64xf32>, %v: tensor<6x2x32xf32>, %qp: tensor<4xi32>, %kp: tensor<4xi32>) {
  // expected-error @+1 {{'lm.attention' op expects k_positions dim 0 (4) to equal k dim 0 (6)}}
  %r = lm.attention %q, %k, %v q_positions %qp k_positions %kp causal {scale = 0.125 : f64} : (tensor<4x8x64xf32>, tensor<6x2x64xf32>, tensor<6x2x32xf32>, tensor<4xi32>, tensor<4xi32>) -> tensor<4x8x32xf32>
  return
}

// -----

// Tests that lm.attention rejects q_segments that are not rank 1.
func.func @attention_q_segments_rank(%q: tensor<4x8x64xf32>, %k: tensor<6x2x64xf32>, %v: tensor<6x2x32xf32>, %qs: tensor<1x4xi32>, %ks: tensor<6xi32>) {
  // expected-error @+1 {{'lm.attention' op expects q_segments of rank 1, got 'tensor<1x4xi32>'}}
  %r = lm.attention %q, %k, %v q_segments %qs k_segments %ks bidirectional {scale = 0.125 : f64} : (tensor<4x8x64xf32>, tensor<6x2x64xf32>, tensor<6x2x32xf32>, tensor<1x4xi32>, tensor<6xi32>) -> tensor<4x8x32xf32>
  return
}

// -----

// Tests that lm.attention rejects q_segments whose size differs from q's token count.
func.func @attention_q_segments_dim(%q: tensor<4x8x64xf32>, %k: tensor<6x2x64xf32>, %v: tensor<6x2x32xf32>, %qs: tensor<5xi32>, %ks: tensor<6xi32>) {
  // expected-error @+1 {{'lm.attention' op expects q_segments dim 0 (5) to equal q dim 0 (4)}}
  %r = lm.attention %q, %k, %v q_segments %qs k_segments %ks bidirectional {scale = 0.125 : f64} : (tensor<4x8x64xf32>, tensor<6x2x64xf32>, tensor<6x2x32xf32>, tensor<5xi32>, tensor<6xi32>) -> tensor<4x8x32xf32>
  return
}

// -----

// Tests that lm.attention rejects k_segments that are not rank 1.
func.func @attention_k_segments_rank(%q: tensor<4x8x64xf32>, %k: tensor<6x2x64xf32>, %v: tensor<6x2x32xf32>, %qs: tensor<4xi32>, %ks: tensor<6x1xi32>) {
  // expected-error @+1 {{'lm.attention' op expects k_segments of rank 1, got 'tensor<6x1xi32>'}}
  %r = lm.attention %q, %k, %v q_segments %qs k_segments %ks bidirectional {scale = 0.125 : f64} : (tensor<4x8x64xf32>, tensor<6x2x64xf32>, tensor<6x2x32xf32>, tensor<4xi32>, tensor<6x1xi32>) -> tensor<4x8x32xf32>
  return
}

// -----

// Tests that lm.attention rejects k_segments whose size differs from k's key count.
func.func @attention_k_segments_dim(%q: tensor<4x8x64xf32>, %k: tensor<6x2x64xf32>, %v: tensor<6x2x32xf32>, %qs: tensor<4xi32>, %ks: tensor<4xi32>) {
  // expected-error @+1 {{'lm.attention' op expects k_segments dim 0 (4) to equal k dim 0 (6)}}
  %r = lm.attention %q, %k, %v q_segments %qs k_segments %ks bidirectional {scale = 0.125 : f64} : (tensor<4x8x64xf32>, tensor<6x2x64xf32>, tensor<6x2x32xf32>, tensor<4xi32>, tensor<4xi32>) -> tensor<4x8x32xf32>
  return
}

// -----

// Tests that lm.attention rejects a sliding_window mask without a window.
func.func @attention_sliding_no_window(%q: tensor<4x8x64xf32>, %k: tensor<6x2x64xf32>, %v: tensor<6x2x32xf32>) {
  // expected-error @+1 {{'lm.attention' op expects a window exactly when the mask is sliding_window}}
  %r = lm.attention %q, %k, %v sliding_window {scale = 0.125 : f64} : (tensor<4x8x64xf32>, tensor<6x2x64xf32>, tensor<6x2x32xf32>) -> tensor<4x8x32xf32>
  return
}

// -----

// Tests that lm.attention rejects a window with a causal mask.
func.func @attention_window_not_sliding(%q: tensor<4x8x64xf32>, %k: tensor<6x2x64xf32>, %v: tensor<6x2x32xf32>) {
  // expected-error @+1 {{'lm.attention' op expects a window exactly when the mask is sliding_window}}
  %r = lm.attention %q, %k, %v causal {scale = 0.125 : f64, window = 128 : i64} : (tensor<4x8x64xf32>, tensor<6x2x64xf32>, tensor<6x2x32xf32>) -> tensor<4x8x32xf32>
  return
}

// -----

// Tests that lm.attention rejects window = 0.
func.func @attention_window_zero(%q: tensor<4x8x64xf32>, %k: tensor<6x2x64xf32>, %v: tensor<6x2x32xf32>) {
  // expected-error @+1 {{'lm.attention' op expects window > 0, got 0}}
  %r = lm.attention %q, %k, %v sliding_window {scale = 0.125 : f64, window = 0 : i64} : (tensor<4x8x64xf32>, tensor<6x2x64xf32>, tensor<6x2x32xf32>) -> tensor<4x8x32xf32>
  return
}

// -----

// Tests that lm.attention rejects a negative window.
func.func @attention_window_negative(%q: tensor<4x8x64xf32>, %k: tensor<6x2x64xf32>, %v: tensor<6x2x32xf32>) {
  // expected-error @+1 {{'lm.attention' op expects window > 0, got -4}}
  %r = lm.attention %q, %k, %v sliding_window {scale = 0.125 : f64, window = -4 : i64} : (tensor<4x8x64xf32>, tensor<6x2x64xf32>, tensor<6x2x32xf32>) -> tensor<4x8x32xf32>
  return
}

// -----

// Tests that lm.attention rejects scale = 0.
func.func @attention_scale(%q: tensor<4x8x64xf32>, %k: tensor<6x2x64xf32>, %v: tensor<6x2x32xf32>) {
  // expected-error @+1 {{'lm.attention' op expects scale > 0, got 0.000000e+00}}
  %r = lm.attention %q, %k, %v causal {scale = 0.0 : f64} : (tensor<4x8x64xf32>, tensor<6x2x64xf32>, tensor<6x2x32xf32>) -> tensor<4x8x32xf32>
  return
}

// -----

// Tests that lm.attention rejects a result that is not rank 3.
func.func @attention_result_rank(%q: tensor<4x8x64xf32>, %k: tensor<6x2x64xf32>, %v: tensor<6x2x32xf32>) {
  // expected-error @+1 {{'lm.attention' op expects result of rank 3, got 'tensor<4x256xf32>'}}
  %r = lm.attention %q, %k, %v causal {scale = 0.125 : f64} : (tensor<4x8x64xf32>, tensor<6x2x64xf32>, tensor<6x2x32xf32>) -> tensor<4x256xf32>
  return
}

// -----

// Tests that lm.attention rejects a result whose token count differs from q's.
func.func @attention_result_tokens(%q: tensor<4x8x64xf32>, %k: tensor<6x2x64xf32>, %v: tensor<6x2x32xf32>) {
  // expected-error @+1 {{'lm.attention' op expects result dim 0 (6) to equal q dim 0 (4)}}
  %r = lm.attention %q, %k, %v causal {scale = 0.125 : f64} : (tensor<4x8x64xf32>, tensor<6x2x64xf32>, tensor<6x2x32xf32>) -> tensor<6x8x32xf32>
  return
}

// -----

// Tests that lm.attention rejects a result with one head per KV head.
func.func @attention_result_heads(%q: tensor<4x8x64xf32>, %k: tensor<6x2x64xf32>, %v: tensor<6x2x32xf32>) {
  // expected-error @+1 {{'lm.attention' op expects result dim 1 (2) to equal q dim 1 (8)}}
  %r = lm.attention %q, %k, %v causal {scale = 0.125 : f64} : (tensor<4x8x64xf32>, tensor<6x2x64xf32>, tensor<6x2x32xf32>) -> tensor<4x2x32xf32>
  return
}

// -----

// Tests that lm.attention rejects a result whose head dim is q's rather than v's.
func.func @attention_result_dim(%q: tensor<4x8x64xf32>, %k: tensor<6x2x64xf32>, %v: tensor<6x2x32xf32>) {
  // expected-error @+1 {{'lm.attention' op expects result dim 2 (64) to equal v dim 2 (32)}}
  %r = lm.attention %q, %k, %v causal {scale = 0.125 : f64} : (tensor<4x8x64xf32>, tensor<6x2x64xf32>, tensor<6x2x32xf32>) -> tensor<4x8x64xf32>
  return
}

// -----

// Tests that lm.attention rejects i64 segments (ODS: i32).
func.func @attention_ods_segments_i64(%q: tensor<4x8x64xf32>, %k: tensor<6x2x64xf32>, %v: tensor<6x2x32xf32>, %qs: tensor<4xi64>, %ks: tensor<6xi64>) {
  // expected-error @+1 {{'lm.attention' op operand #3 must be ranked tensor of 32-bit signless integer values, but got 'tensor<4xi64>'}}
  %r = lm.attention %q, %k, %v q_segments %qs k_segments %ks bidirectional {scale = 0.125 : f64} : (tensor<4x8x64xf32>, tensor<6x2x64xf32>, tensor<6x2x32xf32>, tensor<4xi64>, tensor<6xi64>) -> tensor<4x8x32xf32>
  return
}

// -----

// Tests that lm.attention rejects float positions (ODS: i32 or i64).
func.func @attention_ods_positions_f32(%q: tensor<4x8x64xf32>, %k: tensor<6x2x64xf32>, %v: tensor<6x2x32xf32>, %qp: tensor<4xf32>, %kp: tensor<6xi32>) {
  // expected-error @+1 {{'lm.attention' op operand #3 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xf32>'}}
  %r = lm.attention %q, %k, %v q_positions %qp k_positions %kp causal {scale = 0.125 : f64} : (tensor<4x8x64xf32>, tensor<6x2x64xf32>, tensor<6x2x32xf32>, tensor<4xf32>, tensor<6xi32>) -> tensor<4x8x32xf32>
  return
}

// -----

// Tests that lm.attention rejects bf16 sinks (ODS: f32).
func.func @attention_ods_sinks_bf16(%q: tensor<4x8x64xf32>, %k: tensor<6x2x64xf32>, %v: tensor<6x2x32xf32>, %sinks: tensor<8xbf16>) {
  // expected-error @+1 {{'lm.attention' op operand #3 must be ranked tensor of 32-bit float values, but got 'tensor<8xbf16>'}}
  %r = lm.attention %q, %k, %v sinks %sinks causal {scale = 0.125 : f64} : (tensor<4x8x64xf32>, tensor<6x2x64xf32>, tensor<6x2x32xf32>, tensor<8xbf16>) -> tensor<4x8x32xf32>
  return
}

// -----

// Tests that lm.attention (generic form) rejects operandSegmentSizes that disagree with the operands (ODS).
func.func @attention_ods_segment_sizes(%q: tensor<4x8x64xf32>) {
  // expected-error @+1 {{'lm.attention' op operand count (3) does not match with the total size (4) specified in attribute 'operandSegmentSizes'}}
  %r = "lm.attention"(%q, %q, %q) <{mask = #lm<mask causal>, scale = 1.0 : f64, operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 1>}> : (tensor<4x8x64xf32>, tensor<4x8x64xf32>, tensor<4x8x64xf32>) -> tensor<4x8x64xf32>
  return
}

// -----

// Tests that lm.attention rejects an f64 q (ODS: f32, bf16 or f16).
func.func @attention_ods_q_f64(%q: tensor<4x8x64xf64>, %k: tensor<6x2x64xf32>, %v: tensor<6x2x32xf32>) {
  // expected-error @+1 {{'lm.attention' op operand #0 must be ranked tensor of 32-bit float or bfloat16 type or 16-bit float values, but got 'tensor<4x8x64xf64>'}}
  %r = lm.attention %q, %k, %v causal {scale = 0.125 : f64} : (tensor<4x8x64xf64>, tensor<6x2x64xf32>, tensor<6x2x32xf32>) -> tensor<4x8x32xf32>
  return
}

// -----

// Tests that lm.sparse_attention rejects a q that is not rank 3.
func.func @sparse_attention_q_rank(%q: tensor<4x768xbf16>, %kv: tensor<10x96xbf16>, %idx: tensor<4x16xi32>) {
  // expected-error @+1 {{'lm.sparse_attention' op expects q of rank 3, got 'tensor<4x768xbf16>'}}
  %r = lm.sparse_attention %q, %kv, %idx {scale = 0.125 : f64, value_dim = 64 : i64} : (tensor<4x768xbf16>, tensor<10x96xbf16>, tensor<4x16xi32>) -> tensor<4x8x64xbf16>
  return
}

// -----

// Tests that lm.sparse_attention rejects a per-head kv (MLA shares one key row).
func.func @sparse_attention_kv_rank(%q: tensor<4x8x96xbf16>, %kv: tensor<10x8x96xbf16>, %idx: tensor<4x16xi32>) {
  // expected-error @+1 {{'lm.sparse_attention' op expects kv of rank 2, got 'tensor<10x8x96xbf16>'}}
  %r = lm.sparse_attention %q, %kv, %idx {scale = 0.125 : f64, value_dim = 64 : i64} : (tensor<4x8x96xbf16>, tensor<10x8x96xbf16>, tensor<4x16xi32>) -> tensor<4x8x64xbf16>
  return
}

// -----

// Tests that lm.sparse_attention rejects indices that are not rank 2.
func.func @sparse_attention_indices_rank(%q: tensor<4x8x96xbf16>, %kv: tensor<10x96xbf16>, %idx: tensor<64xi32>) {
  // expected-error @+1 {{'lm.sparse_attention' op expects indices of rank 2, got 'tensor<64xi32>'}}
  %r = lm.sparse_attention %q, %kv, %idx {scale = 0.125 : f64, value_dim = 64 : i64} : (tensor<4x8x96xbf16>, tensor<10x96xbf16>, tensor<64xi32>) -> tensor<4x8x64xbf16>
  return
}

// -----

// Tests that lm.sparse_attention rejects a kv whose width differs from q's head dim.
func.func @sparse_attention_kv_dim(%q: tensor<4x8x96xbf16>, %kv: tensor<10x64xbf16>, %idx: tensor<4x16xi32>) {
  // expected-error @+1 {{'lm.sparse_attention' op expects kv dim -1 (64) to equal q dim 2 (96)}}
  %r = lm.sparse_attention %q, %kv, %idx {scale = 0.125 : f64, value_dim = 64 : i64} : (tensor<4x8x96xbf16>, tensor<10x64xbf16>, tensor<4x16xi32>) -> tensor<4x8x64xbf16>
  return
}

// -----

// Tests that lm.sparse_attention rejects indices whose token count differs from q's.
func.func @sparse_attention_indices_tokens(%q: tensor<4x8x96xbf16>, %kv: tensor<10x96xbf16>, %idx: tensor<2x16xi32>) {
  // expected-error @+1 {{'lm.sparse_attention' op expects indices dim 0 (2) to equal q dim 0 (4)}}
  %r = lm.sparse_attention %q, %kv, %idx {scale = 0.125 : f64, value_dim = 64 : i64} : (tensor<4x8x96xbf16>, tensor<10x96xbf16>, tensor<2x16xi32>) -> tensor<4x8x64xbf16>
  return
}

// -----

// Tests that lm.sparse_attention rejects value_dim = 0.
func.func @sparse_attention_value_dim_zero(%q: tensor<4x8x96xbf16>, %kv: tensor<10x96xbf16>, %idx: tensor<4x16xi32>) {
  // expected-error @+1 {{'lm.sparse_attention' op expects 0 < value_dim <= the query/key dim (96), got 0}}
  %r = lm.sparse_attention %q, %kv, %idx {scale = 0.125 : f64, value_dim = 0 : i64} : (tensor<4x8x96xbf16>, tensor<10x96xbf16>, tensor<4x16xi32>) -> tensor<4x8x0xbf16>
  return
}

// -----

// Tests that lm.sparse_attention rejects a value_dim wider than the key.
func.func @sparse_attention_value_dim_large(%q: tensor<4x8x96xbf16>, %kv: tensor<10x96xbf16>, %idx: tensor<4x16xi32>) {
  // expected-error @+1 {{'lm.sparse_attention' op expects 0 < value_dim <= the query/key dim (96), got 128}}
  %r = lm.sparse_attention %q, %kv, %idx {scale = 0.125 : f64, value_dim = 128 : i64} : (tensor<4x8x96xbf16>, tensor<10x96xbf16>, tensor<4x16xi32>) -> tensor<4x8x128xbf16>
  return
}

// -----

// Tests that lm.sparse_attention rejects sinks that are not rank 1.
func.func @sparse_attention_sinks_rank(%q: tensor<4x8x96xbf16>, %kv: tensor<10x96xbf16>, %idx: tensor<4x16xi32>, %sinks: tensor<1x8xf32>) {
  // expected-error @+1 {{'lm.sparse_attention' op expects sinks of rank 1, got 'tensor<1x8xf32>'}}
  %r = lm.sparse_attention %q, %kv, %idx sinks %sinks {scale = 0.125 : f64, value_dim = 64 : i64} : (tensor<4x8x96xbf16>, tensor<10x96xbf16>, tensor<4x16xi32>, tensor<1x8xf32>) -> tensor<4x8x64xbf16>
  return
}

// -----

// Tests that lm.sparse_attention rejects sinks whose size differs from the head count.
func.func @sparse_attention_sinks_dim(%q: tensor<4x8x96xbf16>, %kv: tensor<10x96xbf16>, %idx: tensor<4x16xi32>, %sinks: tensor<16xf32>) {
  // expected-error @+1 {{'lm.sparse_attention' op expects sinks dim 0 (16) to equal q dim 1 (8)}}
  %r = lm.sparse_attention %q, %kv, %idx sinks %sinks {scale = 0.125 : f64, value_dim = 64 : i64} : (tensor<4x8x96xbf16>, tensor<10x96xbf16>, tensor<4x16xi32>, tensor<16xf32>) -> tensor<4x8x64xbf16>
  return
}

// -----

// Tests that lm.sparse_attention rejects a negative scale.
func.func @sparse_attention_scale(%q: tensor<4x8x96xbf16>, %kv: tensor<10x96xbf16>, %idx: tensor<4x16xi32>) {
  // expected-error @+1 {{'lm.sparse_attention' op expects scale > 0, got -1.250000e-01}}
  %r = lm.sparse_attention %q, %kv, %idx {scale = -0.125 : f64, value_dim = 64 : i64} : (tensor<4x8x96xbf16>, tensor<10x96xbf16>, tensor<4x16xi32>) -> tensor<4x8x64xbf16>
  return
}

// -----

// Tests that lm.sparse_attention rejects a result that is not rank 3.
func.func @sparse_attention_result_rank(%q: tensor<4x8x96xbf16>, %kv: tensor<10x96xbf16>, %idx: tensor<4x16xi32>) {
  // expected-error @+1 {{'lm.sparse_attention' op expects result of rank 3, got 'tensor<4x512xbf16>'}}
  %r = lm.sparse_attention %q, %kv, %idx {scale = 0.125 : f64, value_dim = 64 : i64} : (tensor<4x8x96xbf16>, tensor<10x96xbf16>, tensor<4x16xi32>) -> tensor<4x512xbf16>
  return
}

// -----

// Tests that lm.sparse_attention rejects a result whose token count differs from q's.
func.func @sparse_attention_result_tokens(%q: tensor<4x8x96xbf16>, %kv: tensor<10x96xbf16>, %idx: tensor<4x16xi32>) {
  // expected-error @+1 {{'lm.sparse_attention' op expects result dim 0 (3) to equal q dim 0 (4)}}
  %r = lm.sparse_attention %q, %kv, %idx {scale = 0.125 : f64, value_dim = 64 : i64} : (tensor<4x8x96xbf16>, tensor<10x96xbf16>, tensor<4x16xi32>) -> tensor<3x8x64xbf16>
  return
}

// -----

// Tests that lm.sparse_attention rejects a result whose head count differs from q's.
func.func @sparse_attention_result_heads(%q: tensor<4x8x96xbf16>, %kv: tensor<10x96xbf16>, %idx: tensor<4x16xi32>) {
  // expected-error @+1 {{'lm.sparse_attention' op expects result dim 1 (1) to equal q dim 1 (8)}}
  %r = lm.sparse_attention %q, %kv, %idx {scale = 0.125 : f64, value_dim = 64 : i64} : (tensor<4x8x96xbf16>, tensor<10x96xbf16>, tensor<4x16xi32>) -> tensor<4x1x64xbf16>
  return
}

// -----

// Tests that lm.sparse_attention rejects a result whose last dim is not value_dim.
func.func @sparse_attention_result_value_dim(%q: tensor<4x8x96xbf16>, %kv: tensor<10x96xbf16>, %idx: tensor<4x16xi32>) {
  // expected-error @+1 {{'lm.sparse_attention' op expects result dim 2 to be 64 (value_dim), got 96}}
  %r = lm.sparse_attention %q, %kv, %idx {scale = 0.125 : f64, value_dim = 64 : i64} : (tensor<4x8x96xbf16>, tensor<10x96xbf16>, tensor<4x16xi32>) -> tensor<4x8x96xbf16>
  return
}

// -----

// Tests that lm.sparse_attention rejects i64 indices (ODS: i32).
func.func @sparse_attention_ods_indices_i64(%q: tensor<4x8x96xbf16>, %kv: tensor<10x96xbf16>, %idx: tensor<4x16xi64>) {
  // expected-error @+1 {{'lm.sparse_attention' op operand #2 must be ranked tensor of 32-bit signless integer values, but got 'tensor<4x16xi64>'}}
  %r = lm.sparse_attention %q, %kv, %idx {scale = 0.125 : f64, value_dim = 64 : i64} : (tensor<4x8x96xbf16>, tensor<10x96xbf16>, tensor<4x16xi64>) -> tensor<4x8x64xbf16>
  return
}

// -----

// Tests that lm.sparse_attention requires value_dim (ODS).
func.func @sparse_attention_ods_missing_value_dim(%q: tensor<4x8x96xbf16>, %kv: tensor<10x96xbf16>, %idx: tensor<4x16xi32>) {
  // expected-error @+1 {{'lm.sparse_attention' op requires attribute 'value_dim'}}
  %r = lm.sparse_attention %q, %kv, %idx {scale = 0.125 : f64} : (tensor<4x8x96xbf16>, tensor<10x96xbf16>, tensor<4x16xi32>) -> tensor<4x8x64xbf16>
  return
}

// -----

// Tests that lm.dsa_indexer_scores rejects a q that is not rank 3.
func.func @dsa_indexer_scores_q_rank(%q: tensor<4x256xbf16>, %k: tensor<10x32xbf16>, %w: tensor<4x8xf32>) {
  // expected-error @+1 {{'lm.dsa_indexer_scores' op expects q of rank 3, got 'tensor<4x256xbf16>'}}
  %r = lm.dsa_indexer_scores %q, %k, %w {scale = 0.125 : f64} : (tensor<4x256xbf16>, tensor<10x32xbf16>, tensor<4x8xf32>) -> tensor<4x10xf32>
  return
}

// -----

// Tests that lm.dsa_indexer_scores rejects bounds for another number of queries.
func.func @dsa_indexer_scores_bounds(%q: tensor<4x8x32xbf16>, %k: tensor<10x32xbf16>, %w: tensor<4x8xf32>, %b: tensor<3xi32>) {
  // expected-error @+1 {{'lm.dsa_indexer_scores' op expects bounds dim 0 (3) to equal q dim 0 (4)}}
  %r = lm.dsa_indexer_scores %q, %k, %w bounds %b {scale = 0.125 : f64} : (tensor<4x8x32xbf16>, tensor<10x32xbf16>, tensor<4x8xf32>, tensor<3xi32>) -> tensor<4x10xf32>
  return
}

// -----

// Tests that lm.dsa_indexer_scores rejects a per-head k (one key per token).
func.func @dsa_indexer_scores_k_rank(%q: tensor<4x8x32xbf16>, %k: tensor<10x8x32xbf16>, %w: tensor<4x8xf32>) {
  // expected-error @+1 {{'lm.dsa_indexer_scores' op expects k of rank 2, got 'tensor<10x8x32xbf16>'}}
  %r = lm.dsa_indexer_scores %q, %k, %w {scale = 0.125 : f64} : (tensor<4x8x32xbf16>, tensor<10x8x32xbf16>, tensor<4x8xf32>) -> tensor<4x10xf32>
  return
}

// -----

// Tests that lm.dsa_indexer_scores rejects weights that are not rank 2.
func.func @dsa_indexer_scores_weights_rank(%q: tensor<4x8x32xbf16>, %k: tensor<10x32xbf16>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'lm.dsa_indexer_scores' op expects weights of rank 2, got 'tensor<8xf32>'}}
  %r = lm.dsa_indexer_scores %q, %k, %w {scale = 0.125 : f64} : (tensor<4x8x32xbf16>, tensor<10x32xbf16>, tensor<8xf32>) -> tensor<4x10xf32>
  return
}

// -----

// Tests that lm.dsa_indexer_scores rejects a k whose width differs from q's head dim.
func.func @dsa_indexer_scores_k_dim(%q: tensor<4x8x32xbf16>, %k: tensor<10x64xbf16>, %w: tensor<4x8xf32>) {
  // expected-error @+1 {{'lm.dsa_indexer_scores' op expects k dim -1 (64) to equal q dim 2 (32)}}
  %r = lm.dsa_indexer_scores %q, %k, %w {scale = 0.125 : f64} : (tensor<4x8x32xbf16>, tensor<10x64xbf16>, tensor<4x8xf32>) -> tensor<4x10xf32>
  return
}

// -----

// Tests that lm.dsa_indexer_scores rejects weights whose token count differs from q's.
func.func @dsa_indexer_scores_weights_tokens(%q: tensor<4x8x32xbf16>, %k: tensor<10x32xbf16>, %w: tensor<1x8xf32>) {
  // expected-error @+1 {{'lm.dsa_indexer_scores' op expects weights dim 0 (1) to equal q dim 0 (4)}}
  %r = lm.dsa_indexer_scores %q, %k, %w {scale = 0.125 : f64} : (tensor<4x8x32xbf16>, tensor<10x32xbf16>, tensor<1x8xf32>) -> tensor<4x10xf32>
  return
}

// -----

// Tests that lm.dsa_indexer_scores rejects weights whose head count differs from q's.
func.func @dsa_indexer_scores_weights_heads(%q: tensor<4x8x32xbf16>, %k: tensor<10x32xbf16>, %w: tensor<4x64xf32>) {
  // expected-error @+1 {{'lm.dsa_indexer_scores' op expects weights dim 1 (64) to equal q dim 1 (8)}}
  %r = lm.dsa_indexer_scores %q, %k, %w {scale = 0.125 : f64} : (tensor<4x8x32xbf16>, tensor<10x32xbf16>, tensor<4x64xf32>) -> tensor<4x10xf32>
  return
}

// -----

// Tests that lm.dsa_indexer_scores rejects scale = 0.
func.func @dsa_indexer_scores_scale(%q: tensor<4x8x32xbf16>, %k: tensor<10x32xbf16>, %w: tensor<4x8xf32>) {
  // expected-error @+1 {{'lm.dsa_indexer_scores' op expects scale > 0, got 0.000000e+00}}
  %r = lm.dsa_indexer_scores %q, %k, %w {scale = 0.0 : f64} : (tensor<4x8x32xbf16>, tensor<10x32xbf16>, tensor<4x8xf32>) -> tensor<4x10xf32>
  return
}

// -----

// Tests that lm.dsa_indexer_scores rejects a result that is not rank 2.
func.func @dsa_indexer_scores_result_rank(%q: tensor<4x8x32xbf16>, %k: tensor<10x32xbf16>, %w: tensor<4x8xf32>) {
  // expected-error @+1 {{'lm.dsa_indexer_scores' op expects result of rank 2, got 'tensor<4x8x10xf32>'}}
  %r = lm.dsa_indexer_scores %q, %k, %w {scale = 0.125 : f64} : (tensor<4x8x32xbf16>, tensor<10x32xbf16>, tensor<4x8xf32>) -> tensor<4x8x10xf32>
  return
}

// -----

// Tests that lm.dsa_indexer_scores rejects a result whose row count differs from q's tokens.
func.func @dsa_indexer_scores_result_tokens(%q: tensor<4x8x32xbf16>, %k: tensor<10x32xbf16>, %w: tensor<4x8xf32>) {
  // expected-error @+1 {{'lm.dsa_indexer_scores' op expects result dim 0 (10) to equal q dim 0 (4)}}
  %r = lm.dsa_indexer_scores %q, %k, %w {scale = 0.125 : f64} : (tensor<4x8x32xbf16>, tensor<10x32xbf16>, tensor<4x8xf32>) -> tensor<10x10xf32>
  return
}

// -----

// Tests that lm.dsa_indexer_scores rejects a result whose column count differs from k's keys.
func.func @dsa_indexer_scores_result_keys(%q: tensor<4x8x32xbf16>, %k: tensor<10x32xbf16>, %w: tensor<4x8xf32>) {
  // expected-error @+1 {{'lm.dsa_indexer_scores' op expects result dim 1 (4) to equal k dim 0 (10)}}
  %r = lm.dsa_indexer_scores %q, %k, %w {scale = 0.125 : f64} : (tensor<4x8x32xbf16>, tensor<10x32xbf16>, tensor<4x8xf32>) -> tensor<4x4xf32>
  return
}

// -----

// Tests that lm.dsa_indexer_scores rejects a bf16 result (ODS: f32).
func.func @dsa_indexer_scores_ods_result_bf16(%q: tensor<4x8x32xbf16>, %k: tensor<10x32xbf16>, %w: tensor<4x8xf32>) {
  // expected-error @+1 {{'lm.dsa_indexer_scores' op result #0 must be ranked tensor of 32-bit float values, but got 'tensor<4x10xbf16>'}}
  %r = lm.dsa_indexer_scores %q, %k, %w {scale = 0.125 : f64} : (tensor<4x8x32xbf16>, tensor<10x32xbf16>, tensor<4x8xf32>) -> tensor<4x10xbf16>
  return
}

// -----

// Tests that lm.dsa_index_select rejects scores that are not rank 2.
func.func @dsa_index_select_scores_rank(%scores: tensor<40xf32>, %bounds: tensor<4xi32>) {
  // expected-error @+1 {{'lm.dsa_index_select' op expects scores of rank 2, got 'tensor<40xf32>'}}
  %r = lm.dsa_index_select %scores, %bounds {top_k = 8 : i64} : (tensor<40xf32>, tensor<4xi32>) -> tensor<4x8xi32>
  return
}

// -----

// Tests that lm.dsa_index_select rejects bounds that are not rank 1.
func.func @dsa_index_select_bounds_rank(%scores: tensor<4x10xf32>, %bounds: tensor<4x1xi32>) {
  // expected-error @+1 {{'lm.dsa_index_select' op expects bounds of rank 1, got 'tensor<4x1xi32>'}}
  %r = lm.dsa_index_select %scores, %bounds {top_k = 8 : i64} : (tensor<4x10xf32>, tensor<4x1xi32>) -> tensor<4x8xi32>
  return
}

// -----

// Tests that lm.dsa_index_select rejects bounds whose size differs from the query count.
func.func @dsa_index_select_bounds_dim(%scores: tensor<4x10xf32>, %bounds: tensor<10xi32>) {
  // expected-error @+1 {{'lm.dsa_index_select' op expects bounds dim 0 (10) to equal scores dim 0 (4)}}
  %r = lm.dsa_index_select %scores, %bounds {top_k = 8 : i64} : (tensor<4x10xf32>, tensor<10xi32>) -> tensor<4x8xi32>
  return
}

// -----

// Tests that lm.dsa_index_select rejects top_k = 0.
func.func @dsa_index_select_top_k(%scores: tensor<4x10xf32>, %bounds: tensor<4xi32>) {
  // expected-error @+1 {{'lm.dsa_index_select' op expects top_k > 0, got 0}}
  %r = lm.dsa_index_select %scores, %bounds {top_k = 0 : i64} : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<4x0xi32>
  return
}

// -----

// Tests that lm.dsa_index_select rejects a negative top_k.
func.func @dsa_index_select_top_k_negative(%scores: tensor<4x10xf32>, %bounds: tensor<4xi32>) {
  // expected-error @+1 {{'lm.dsa_index_select' op expects top_k > 0, got -1}}
  %r = lm.dsa_index_select %scores, %bounds {top_k = -1 : i64} : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<4x8xi32>
  return
}

// -----

// Tests that lm.dsa_index_select rejects a result that is not rank 2.
func.func @dsa_index_select_result_rank(%scores: tensor<4x10xf32>, %bounds: tensor<4xi32>) {
  // expected-error @+1 {{'lm.dsa_index_select' op expects result of rank 2, got 'tensor<32xi32>'}}
  %r = lm.dsa_index_select %scores, %bounds {top_k = 8 : i64} : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<32xi32>
  return
}

// -----

// Tests that lm.dsa_index_select rejects a result whose row count differs from the query count.
func.func @dsa_index_select_result_tokens(%scores: tensor<4x10xf32>, %bounds: tensor<4xi32>) {
  // expected-error @+1 {{'lm.dsa_index_select' op expects result dim 0 (5) to equal scores dim 0 (4)}}
  %r = lm.dsa_index_select %scores, %bounds {top_k = 8 : i64} : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<5x8xi32>
  return
}

// -----

// Tests that lm.dsa_index_select rejects a result with other than top_k columns.
func.func @dsa_index_select_result_top_k(%scores: tensor<4x10xf32>, %bounds: tensor<4xi32>) {
  // expected-error @+1 {{'lm.dsa_index_select' op expects result dim 1 to be 8 (top_k), got 10}}
  %r = lm.dsa_index_select %scores, %bounds {top_k = 8 : i64} : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<4x10xi32>
  return
}

// -----

// Tests that lm.dsa_index_select rejects bf16 scores (ODS: f32).
func.func @dsa_index_select_ods_scores_bf16(%scores: tensor<4x10xbf16>, %bounds: tensor<4xi32>) {
  // expected-error @+1 {{'lm.dsa_index_select' op operand #0 must be ranked tensor of 32-bit float values, but got 'tensor<4x10xbf16>'}}
  %r = lm.dsa_index_select %scores, %bounds {top_k = 8 : i64} : (tensor<4x10xbf16>, tensor<4xi32>) -> tensor<4x8xi32>
  return
}

// -----

// Tests that lm.dsa_index_select rejects i64 bounds (ODS: i32).
func.func @dsa_index_select_ods_bounds_i64(%scores: tensor<4x10xf32>, %bounds: tensor<4xi64>) {
  // expected-error @+1 {{'lm.dsa_index_select' op operand #1 must be ranked tensor of 32-bit signless integer values, but got 'tensor<4xi64>'}}
  %r = lm.dsa_index_select %scores, %bounds {top_k = 8 : i64} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<4x8xi32>
  return
}

// -----

// Tests that lm.dsa_index_select rejects an i64 result (ODS: i32).
func.func @dsa_index_select_ods_result_i64(%scores: tensor<4x10xf32>, %bounds: tensor<4xi32>) {
  // expected-error @+1 {{'lm.dsa_index_select' op result #0 must be ranked tensor of 32-bit signless integer values, but got 'tensor<4x8xi64>'}}
  %r = lm.dsa_index_select %scores, %bounds {top_k = 8 : i64} : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<4x8xi64>
  return
}

// -----

// Tests that lm.short_conv rejects an input that is not rank 2 ([T, C]).
func.func @short_conv_input_rank(%x: tensor<1x4x16xbf16>, %w: tensor<16x4xbf16>, %st: tensor<3x16xbf16>) {
  // expected-error @+1 {{'lm.short_conv' op expects input of rank 2, got 'tensor<1x4x16xbf16>'}}
  %r:2 = lm.short_conv %x, %w, %st silu : (tensor<1x4x16xbf16>, tensor<16x4xbf16>, tensor<3x16xbf16>) -> (tensor<1x4x16xbf16>, tensor<3x16xbf16>)
  return
}

// -----

// Tests that lm.short_conv rejects a weight that is not rank 2 ([C, W]).
func.func @short_conv_weight_rank(%x: tensor<4x16xbf16>, %w: tensor<16x1x4xbf16>, %st: tensor<3x16xbf16>) {
  // expected-error @+1 {{'lm.short_conv' op expects weight of rank 2, got 'tensor<16x1x4xbf16>'}}
  %r:2 = lm.short_conv %x, %w, %st silu : (tensor<4x16xbf16>, tensor<16x1x4xbf16>, tensor<3x16xbf16>) -> (tensor<4x16xbf16>, tensor<3x16xbf16>)
  return
}

// -----

// Tests that lm.short_conv rejects a state that is not rank 2 ([W-1, C]).
func.func @short_conv_state_rank(%x: tensor<4x16xbf16>, %w: tensor<16x4xbf16>, %st: tensor<48xbf16>) {
  // expected-error @+1 {{'lm.short_conv' op expects state of rank 2, got 'tensor<48xbf16>'}}
  %r:2 = lm.short_conv %x, %w, %st silu : (tensor<4x16xbf16>, tensor<16x4xbf16>, tensor<48xbf16>) -> (tensor<4x16xbf16>, tensor<48xbf16>)
  return
}

// -----

// Tests that lm.short_conv rejects a [W, C] (transposed) weight.
func.func @short_conv_weight_channels(%x: tensor<4x16xbf16>, %w: tensor<4x16xbf16>, %st: tensor<3x16xbf16>) {
  // expected-error @+1 {{'lm.short_conv' op expects weight dim 0 (4) to equal input dim 1 (16)}}
  %r:2 = lm.short_conv %x, %w, %st silu : (tensor<4x16xbf16>, tensor<4x16xbf16>, tensor<3x16xbf16>) -> (tensor<4x16xbf16>, tensor<3x16xbf16>)
  return
}

// -----

// Tests that lm.short_conv rejects a [C, W-1] (transposed) state.
func.func @short_conv_state_channels(%x: tensor<4x16xbf16>, %w: tensor<16x4xbf16>, %st: tensor<16x3xbf16>) {
  // expected-error @+1 {{'lm.short_conv' op expects state dim 1 (3) to equal input dim 1 (16)}}
  %r:2 = lm.short_conv %x, %w, %st silu : (tensor<4x16xbf16>, tensor<16x4xbf16>, tensor<16x3xbf16>) -> (tensor<4x16xbf16>, tensor<16x3xbf16>)
  return
}

// -----

// Tests that lm.short_conv rejects a kernel of width 0.
func.func @short_conv_width_zero(%x: tensor<4x16xbf16>, %w: tensor<16x0xbf16>, %st: tensor<0x16xbf16>) {
  // expected-error @+1 {{'lm.short_conv' op expects kernel width > 0, got 0}}
  %r:2 = lm.short_conv %x, %w, %st silu : (tensor<4x16xbf16>, tensor<16x0xbf16>, tensor<0x16xbf16>) -> (tensor<4x16xbf16>, tensor<0x16xbf16>)
  return
}

// -----

// Tests that lm.short_conv rejects a state that does not hold W-1 rows.
func.func @short_conv_state_rows(%x: tensor<4x16xbf16>, %w: tensor<16x4xbf16>, %st: tensor<4x16xbf16>) {
  // expected-error @+1 {{'lm.short_conv' op expects state dim 0 to be 3 (kernel width - 1), got 4}}
  %r:2 = lm.short_conv %x, %w, %st silu : (tensor<4x16xbf16>, tensor<16x4xbf16>, tensor<4x16xbf16>) -> (tensor<4x16xbf16>, tensor<4x16xbf16>)
  return
}

// -----

// Tests that lm.short_conv rejects the sigmoid activation.
func.func @short_conv_sigmoid(%x: tensor<4x16xbf16>, %w: tensor<16x4xbf16>, %st: tensor<3x16xbf16>) {
  // expected-error @+1 {{'lm.short_conv' op expects activation none or silu}}
  %r:2 = lm.short_conv %x, %w, %st sigmoid : (tensor<4x16xbf16>, tensor<16x4xbf16>, tensor<3x16xbf16>) -> (tensor<4x16xbf16>, tensor<3x16xbf16>)
  return
}

// -----

// Tests that lm.short_conv rejects an output whose shape differs from the input's.
func.func @short_conv_output_shape(%x: tensor<4x16xbf16>, %w: tensor<16x4xbf16>, %st: tensor<3x16xbf16>) {
  // expected-error @+1 {{'lm.short_conv' op expects output dim 1 (8) to equal input dim 1 (16)}}
  %r:2 = lm.short_conv %x, %w, %st silu : (tensor<4x16xbf16>, tensor<16x4xbf16>, tensor<3x16xbf16>) -> (tensor<4x8xbf16>, tensor<3x16xbf16>)
  return
}

// -----

// Tests that lm.short_conv rejects an output whose rank differs from the input's.
func.func @short_conv_output_rank(%x: tensor<4x16xbf16>, %w: tensor<16x4xbf16>, %st: tensor<3x16xbf16>) {
  // expected-error @+1 {{'lm.short_conv' op expects output and input of the same shape, got 'tensor<64xbf16>' and 'tensor<4x16xbf16>'}}
  %r:2 = lm.short_conv %x, %w, %st silu : (tensor<4x16xbf16>, tensor<16x4xbf16>, tensor<3x16xbf16>) -> (tensor<64xbf16>, tensor<3x16xbf16>)
  return
}

// -----

// Tests that lm.short_conv rejects a new_state whose shape differs from the state's.
func.func @short_conv_new_state_shape(%x: tensor<4x16xbf16>, %w: tensor<16x4xbf16>, %st: tensor<3x16xbf16>) {
  // expected-error @+1 {{'lm.short_conv' op expects new_state dim 0 (4) to equal state dim 0 (3)}}
  %r:2 = lm.short_conv %x, %w, %st silu : (tensor<4x16xbf16>, tensor<16x4xbf16>, tensor<3x16xbf16>) -> (tensor<4x16xbf16>, tensor<4x16xbf16>)
  return
}

// -----

// Tests that lm.short_conv rejects an integer weight (ODS).
func.func @short_conv_ods_weight_int(%x: tensor<4x16xbf16>, %w: tensor<16x4xi8>, %st: tensor<3x16xbf16>) {
  // expected-error @+1 {{'lm.short_conv' op operand #1 must be ranked tensor of 32-bit float or bfloat16 type or 16-bit float values, but got 'tensor<16x4xi8>'}}
  %r:2 = lm.short_conv %x, %w, %st silu : (tensor<4x16xbf16>, tensor<16x4xi8>, tensor<3x16xbf16>) -> (tensor<4x16xbf16>, tensor<3x16xbf16>)
  return
}

// -----

// Tests that lm.kda_gate rejects a raw gate that is not rank 3 ([T, H, Dk]).
func.func @kda_gate_raw_rank(%raw: tensor<4x32xf32>, %alog: tensor<2xf32>, %dtb: tensor<2x16xf32>) {
  // expected-error @+1 {{'lm.kda_gate' op expects raw of rank 3, got 'tensor<4x32xf32>'}}
  %r = lm.kda_gate %raw, %alog, %dtb : (tensor<4x32xf32>, tensor<2xf32>, tensor<2x16xf32>) -> tensor<4x32xf32>
  return
}

// -----

// Tests that lm.kda_gate rejects an a_log that is not rank 1.
func.func @kda_gate_a_log_rank(%raw: tensor<4x2x16xf32>, %alog: tensor<2x1xf32>, %dtb: tensor<2x16xf32>) {
  // expected-error @+1 {{'lm.kda_gate' op expects a_log of rank 1, got 'tensor<2x1xf32>'}}
  %r = lm.kda_gate %raw, %alog, %dtb : (tensor<4x2x16xf32>, tensor<2x1xf32>, tensor<2x16xf32>) -> tensor<4x2x16xf32>
  return
}

// -----

// Tests that lm.kda_gate rejects a dt_bias that is not rank 2 ([H, Dk]).
func.func @kda_gate_dt_bias_rank(%raw: tensor<4x2x16xf32>, %alog: tensor<2xf32>, %dtb: tensor<32xf32>) {
  // expected-error @+1 {{'lm.kda_gate' op expects dt_bias of rank 2, got 'tensor<32xf32>'}}
  %r = lm.kda_gate %raw, %alog, %dtb : (tensor<4x2x16xf32>, tensor<2xf32>, tensor<32xf32>) -> tensor<4x2x16xf32>
  return
}

// -----

// Tests that lm.kda_gate rejects an a_log whose size differs from the head count.
func.func @kda_gate_a_log_dim(%raw: tensor<4x2x16xf32>, %alog: tensor<16xf32>, %dtb: tensor<2x16xf32>) {
  // expected-error @+1 {{'lm.kda_gate' op expects a_log dim 0 (16) to equal raw dim 1 (2)}}
  %r = lm.kda_gate %raw, %alog, %dtb : (tensor<4x2x16xf32>, tensor<16xf32>, tensor<2x16xf32>) -> tensor<4x2x16xf32>
  return
}

// -----

// Tests that lm.kda_gate rejects a dt_bias whose head count differs from raw's.
func.func @kda_gate_dt_bias_heads(%raw: tensor<4x2x16xf32>, %alog: tensor<2xf32>, %dtb: tensor<1x16xf32>) {
  // expected-error @+1 {{'lm.kda_gate' op expects dt_bias dim 0 (1) to equal raw dim 1 (2)}}
  %r = lm.kda_gate %raw, %alog, %dtb : (tensor<4x2x16xf32>, tensor<2xf32>, tensor<1x16xf32>) -> tensor<4x2x16xf32>
  return
}

// -----

// Tests that lm.kda_gate rejects a dt_bias whose Dk differs from raw's.
func.func @kda_gate_dt_bias_dk(%raw: tensor<4x2x16xf32>, %alog: tensor<2xf32>, %dtb: tensor<2x8xf32>) {
  // expected-error @+1 {{'lm.kda_gate' op expects dt_bias dim 1 (8) to equal raw dim 2 (16)}}
  %r = lm.kda_gate %raw, %alog, %dtb : (tensor<4x2x16xf32>, tensor<2xf32>, tensor<2x8xf32>) -> tensor<4x2x16xf32>
  return
}

// -----

// Tests that lm.kda_gate rejects lower_bound = 0 (it must be negative).
func.func @kda_gate_lower_bound_zero(%raw: tensor<4x2x16xf32>, %alog: tensor<2xf32>, %dtb: tensor<2x16xf32>) {
  // expected-error @+1 {{'lm.kda_gate' op expects lower_bound < 0, got 0.000000e+00}}
  %r = lm.kda_gate %raw, %alog, %dtb {lower_bound = 0.0 : f64} : (tensor<4x2x16xf32>, tensor<2xf32>, tensor<2x16xf32>) -> tensor<4x2x16xf32>
  return
}

// -----

// Tests that lm.kda_gate rejects a positive lower_bound.
func.func @kda_gate_lower_bound_positive(%raw: tensor<4x2x16xf32>, %alog: tensor<2xf32>, %dtb: tensor<2x16xf32>) {
  // expected-error @+1 {{'lm.kda_gate' op expects lower_bound < 0, got 5.000000e+00}}
  %r = lm.kda_gate %raw, %alog, %dtb {lower_bound = 5.0 : f64} : (tensor<4x2x16xf32>, tensor<2xf32>, tensor<2x16xf32>) -> tensor<4x2x16xf32>
  return
}

// -----

// Tests that lm.kda_gate rejects a result whose shape differs from raw's.
func.func @kda_gate_result_shape(%raw: tensor<4x2x16xf32>, %alog: tensor<2xf32>, %dtb: tensor<2x16xf32>) {
  // expected-error @+1 {{'lm.kda_gate' op expects result dim 2 (8) to equal raw dim 2 (16)}}
  %r = lm.kda_gate %raw, %alog, %dtb : (tensor<4x2x16xf32>, tensor<2xf32>, tensor<2x16xf32>) -> tensor<4x2x8xf32>
  return
}

// -----

// Tests that lm.kda_gate rejects a bf16 a_log (ODS: f32).
func.func @kda_gate_ods_a_log_bf16(%raw: tensor<4x2x16xf32>, %alog: tensor<2xbf16>, %dtb: tensor<2x16xf32>) {
  // expected-error @+1 {{'lm.kda_gate' op operand #1 must be ranked tensor of 32-bit float values, but got 'tensor<2xbf16>'}}
  %r = lm.kda_gate %raw, %alog, %dtb : (tensor<4x2x16xf32>, tensor<2xbf16>, tensor<2x16xf32>) -> tensor<4x2x16xf32>
  return
}

// -----

// Tests that lm.kda_gate rejects a bf16 result (ODS: f32).
func.func @kda_gate_ods_result_bf16(%raw: tensor<4x2x16xf32>, %alog: tensor<2xf32>, %dtb: tensor<2x16xf32>) {
  // expected-error @+1 {{'lm.kda_gate' op result #0 must be ranked tensor of 32-bit float values, but got 'tensor<4x2x16xbf16>'}}
  %r = lm.kda_gate %raw, %alog, %dtb : (tensor<4x2x16xf32>, tensor<2xf32>, tensor<2x16xf32>) -> tensor<4x2x16xbf16>
  return
}

// -----

// Tests that lm.kda_chunk rejects a q that is not rank 3 ([T, H, Dk]).
func.func @kda_chunk_q_rank(%q: tensor<4x32xf32>, %k: tensor<4x2x16xf32>, %v: tensor<4x2x8xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<4x2xf32>, %st: tensor<2x16x8xf32>) {
  // expected-error @+1 {{'lm.kda_chunk' op expects q of rank 3, got 'tensor<4x32xf32>'}}
  %r:2 = lm.kda_chunk %q, %k, %v, %g, %beta, %st {scale = 0.25 : f64} : (tensor<4x32xf32>, tensor<4x2x16xf32>, tensor<4x2x8xf32>, tensor<4x2x16xf32>, tensor<4x2xf32>, tensor<2x16x8xf32>) -> (tensor<4x2x8xf32>, tensor<2x16x8xf32>)
  return
}

// -----

// Tests that lm.kda_chunk rejects a k whose shape differs from q's.
func.func @kda_chunk_k_shape(%q: tensor<4x2x16xf32>, %k: tensor<4x2x8xf32>, %v: tensor<4x2x8xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<4x2xf32>, %st: tensor<2x16x8xf32>) {
  // expected-error @+1 {{'lm.kda_chunk' op expects k dim 2 (8) to equal q dim 2 (16)}}
  %r:2 = lm.kda_chunk %q, %k, %v, %g, %beta, %st {scale = 0.25 : f64} : (tensor<4x2x16xf32>, tensor<4x2x8xf32>, tensor<4x2x8xf32>, tensor<4x2x16xf32>, tensor<4x2xf32>, tensor<2x16x8xf32>) -> (tensor<4x2x8xf32>, tensor<2x16x8xf32>)
  return
}

// -----

// Tests that lm.kda_chunk rejects a k whose rank differs from q's.
func.func @kda_chunk_k_rank(%q: tensor<4x2x16xf32>, %k: tensor<4x32xf32>, %v: tensor<4x2x8xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<4x2xf32>, %st: tensor<2x16x8xf32>) {
  // expected-error @+1 {{'lm.kda_chunk' op expects k and q of the same shape, got 'tensor<4x32xf32>' and 'tensor<4x2x16xf32>'}}
  %r:2 = lm.kda_chunk %q, %k, %v, %g, %beta, %st {scale = 0.25 : f64} : (tensor<4x2x16xf32>, tensor<4x32xf32>, tensor<4x2x8xf32>, tensor<4x2x16xf32>, tensor<4x2xf32>, tensor<2x16x8xf32>) -> (tensor<4x2x8xf32>, tensor<2x16x8xf32>)
  return
}

// -----

// Tests that lm.kda_chunk rejects a g whose shape differs from q's (a per-head scalar gate).
func.func @kda_chunk_g_shape(%q: tensor<4x2x16xf32>, %k: tensor<4x2x16xf32>, %v: tensor<4x2x8xf32>, %g: tensor<4x2x1xf32>, %beta: tensor<4x2xf32>, %st: tensor<2x16x8xf32>) {
  // expected-error @+1 {{'lm.kda_chunk' op expects g dim 2 (1) to equal q dim 2 (16)}}
  %r:2 = lm.kda_chunk %q, %k, %v, %g, %beta, %st {scale = 0.25 : f64} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x2x8xf32>, tensor<4x2x1xf32>, tensor<4x2xf32>, tensor<2x16x8xf32>) -> (tensor<4x2x8xf32>, tensor<2x16x8xf32>)
  return
}

// -----

// Tests that lm.kda_chunk rejects a v that is not rank 3.
func.func @kda_chunk_v_rank(%q: tensor<4x2x16xf32>, %k: tensor<4x2x16xf32>, %v: tensor<4x16xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<4x2xf32>, %st: tensor<2x16x8xf32>) {
  // expected-error @+1 {{'lm.kda_chunk' op expects v of rank 3, got 'tensor<4x16xf32>'}}
  %r:2 = lm.kda_chunk %q, %k, %v, %g, %beta, %st {scale = 0.25 : f64} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x16xf32>, tensor<4x2x16xf32>, tensor<4x2xf32>, tensor<2x16x8xf32>) -> (tensor<4x16xf32>, tensor<2x16x8xf32>)
  return
}

// -----

// Tests that lm.kda_chunk rejects a v whose token count differs from q's.
func.func @kda_chunk_v_tokens(%q: tensor<4x2x16xf32>, %k: tensor<4x2x16xf32>, %v: tensor<5x2x8xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<4x2xf32>, %st: tensor<2x16x8xf32>) {
  // expected-error @+1 {{'lm.kda_chunk' op expects v dim 0 (5) to equal q dim 0 (4)}}
  %r:2 = lm.kda_chunk %q, %k, %v, %g, %beta, %st {scale = 0.25 : f64} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<5x2x8xf32>, tensor<4x2x16xf32>, tensor<4x2xf32>, tensor<2x16x8xf32>) -> (tensor<5x2x8xf32>, tensor<2x16x8xf32>)
  return
}

// -----

// Tests that lm.kda_chunk rejects a v whose head count differs from q's.
func.func @kda_chunk_v_heads(%q: tensor<4x2x16xf32>, %k: tensor<4x2x16xf32>, %v: tensor<4x1x8xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<4x2xf32>, %st: tensor<2x16x8xf32>) {
  // expected-error @+1 {{'lm.kda_chunk' op expects v dim 1 (1) to equal q dim 1 (2)}}
  %r:2 = lm.kda_chunk %q, %k, %v, %g, %beta, %st {scale = 0.25 : f64} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x1x8xf32>, tensor<4x2x16xf32>, tensor<4x2xf32>, tensor<2x16x8xf32>) -> (tensor<4x1x8xf32>, tensor<2x16x8xf32>)
  return
}

// -----

// Tests that lm.kda_chunk rejects a per-channel beta (it is [T, H]).
func.func @kda_chunk_beta_rank(%q: tensor<4x2x16xf32>, %k: tensor<4x2x16xf32>, %v: tensor<4x2x8xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<4x2x16xf32>, %st: tensor<2x16x8xf32>) {
  // expected-error @+1 {{'lm.kda_chunk' op expects beta of rank 2, got 'tensor<4x2x16xf32>'}}
  %r:2 = lm.kda_chunk %q, %k, %v, %g, %beta, %st {scale = 0.25 : f64} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x2x8xf32>, tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<2x16x8xf32>) -> (tensor<4x2x8xf32>, tensor<2x16x8xf32>)
  return
}

// -----

// Tests that lm.kda_chunk rejects a beta whose token count differs from q's.
func.func @kda_chunk_beta_tokens(%q: tensor<4x2x16xf32>, %k: tensor<4x2x16xf32>, %v: tensor<4x2x8xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<3x2xf32>, %st: tensor<2x16x8xf32>) {
  // expected-error @+1 {{'lm.kda_chunk' op expects beta dim 0 (3) to equal q dim 0 (4)}}
  %r:2 = lm.kda_chunk %q, %k, %v, %g, %beta, %st {scale = 0.25 : f64} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x2x8xf32>, tensor<4x2x16xf32>, tensor<3x2xf32>, tensor<2x16x8xf32>) -> (tensor<4x2x8xf32>, tensor<2x16x8xf32>)
  return
}

// -----

// Tests that lm.kda_chunk rejects a beta whose head count differs from q's.
func.func @kda_chunk_beta_heads(%q: tensor<4x2x16xf32>, %k: tensor<4x2x16xf32>, %v: tensor<4x2x8xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<4x4xf32>, %st: tensor<2x16x8xf32>) {
  // expected-error @+1 {{'lm.kda_chunk' op expects beta dim 1 (4) to equal q dim 1 (2)}}
  %r:2 = lm.kda_chunk %q, %k, %v, %g, %beta, %st {scale = 0.25 : f64} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x2x8xf32>, tensor<4x2x16xf32>, tensor<4x4xf32>, tensor<2x16x8xf32>) -> (tensor<4x2x8xf32>, tensor<2x16x8xf32>)
  return
}

// -----

// Tests that lm.kda_chunk rejects a batched [B, H, Dk, Dv] state (that is lm.kda_step's).
func.func @kda_chunk_state_rank(%q: tensor<4x2x16xf32>, %k: tensor<4x2x16xf32>, %v: tensor<4x2x8xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<4x2xf32>, %st: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{'lm.kda_chunk' op expects state of rank 3, got 'tensor<1x2x16x8xf32>'}}
  %r:2 = lm.kda_chunk %q, %k, %v, %g, %beta, %st {scale = 0.25 : f64} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x2x8xf32>, tensor<4x2x16xf32>, tensor<4x2xf32>, tensor<1x2x16x8xf32>) -> (tensor<4x2x8xf32>, tensor<1x2x16x8xf32>)
  return
}

// -----

// Tests that lm.kda_chunk rejects a state whose head count differs from q's.
func.func @kda_chunk_state_heads(%q: tensor<4x2x16xf32>, %k: tensor<4x2x16xf32>, %v: tensor<4x2x8xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<4x2xf32>, %st: tensor<4x16x8xf32>) {
  // expected-error @+1 {{'lm.kda_chunk' op expects state dim 0 (4) to equal q dim 1 (2)}}
  %r:2 = lm.kda_chunk %q, %k, %v, %g, %beta, %st {scale = 0.25 : f64} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x2x8xf32>, tensor<4x2x16xf32>, tensor<4x2xf32>, tensor<4x16x8xf32>) -> (tensor<4x2x8xf32>, tensor<4x16x8xf32>)
  return
}

// -----

// Tests that lm.kda_chunk rejects a value-major [H, Dv, Dk] state.
func.func @kda_chunk_state_dk(%q: tensor<4x2x16xf32>, %k: tensor<4x2x16xf32>, %v: tensor<4x2x8xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<4x2xf32>, %st: tensor<2x8x16xf32>) {
  // expected-error @+1 {{'lm.kda_chunk' op expects state dim 1 (8) to equal q dim 2 (16)}}
  %r:2 = lm.kda_chunk %q, %k, %v, %g, %beta, %st {scale = 0.25 : f64} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x2x8xf32>, tensor<4x2x16xf32>, tensor<4x2xf32>, tensor<2x8x16xf32>) -> (tensor<4x2x8xf32>, tensor<2x8x16xf32>)
  return
}

// -----

// Tests that lm.kda_chunk rejects a state whose Dv differs from v's.
func.func @kda_chunk_state_dv(%q: tensor<4x2x16xf32>, %k: tensor<4x2x16xf32>, %v: tensor<4x2x8xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<4x2xf32>, %st: tensor<2x16x16xf32>) {
  // expected-error @+1 {{'lm.kda_chunk' op expects state dim 2 (16) to equal v dim 2 (8)}}
  %r:2 = lm.kda_chunk %q, %k, %v, %g, %beta, %st {scale = 0.25 : f64} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x2x8xf32>, tensor<4x2x16xf32>, tensor<4x2xf32>, tensor<2x16x16xf32>) -> (tensor<4x2x8xf32>, tensor<2x16x16xf32>)
  return
}

// -----

// Tests that lm.kda_chunk rejects scale = 0.
func.func @kda_chunk_scale(%q: tensor<4x2x16xf32>, %k: tensor<4x2x16xf32>, %v: tensor<4x2x8xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<4x2xf32>, %st: tensor<2x16x8xf32>) {
  // expected-error @+1 {{'lm.kda_chunk' op expects scale > 0, got 0.000000e+00}}
  %r:2 = lm.kda_chunk %q, %k, %v, %g, %beta, %st {scale = 0.0 : f64} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x2x8xf32>, tensor<4x2x16xf32>, tensor<4x2xf32>, tensor<2x16x8xf32>) -> (tensor<4x2x8xf32>, tensor<2x16x8xf32>)
  return
}

// -----

// Tests that lm.kda_chunk rejects an output shaped like q rather than v.
func.func @kda_chunk_output_shape(%q: tensor<4x2x16xf32>, %k: tensor<4x2x16xf32>, %v: tensor<4x2x8xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<4x2xf32>, %st: tensor<2x16x8xf32>) {
  // expected-error @+1 {{'lm.kda_chunk' op expects output dim 2 (16) to equal v dim 2 (8)}}
  %r:2 = lm.kda_chunk %q, %k, %v, %g, %beta, %st {scale = 0.25 : f64} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x2x8xf32>, tensor<4x2x16xf32>, tensor<4x2xf32>, tensor<2x16x8xf32>) -> (tensor<4x2x16xf32>, tensor<2x16x8xf32>)
  return
}

// -----

// Tests that lm.kda_chunk rejects a new_state whose shape differs from the state's.
func.func @kda_chunk_new_state_shape(%q: tensor<4x2x16xf32>, %k: tensor<4x2x16xf32>, %v: tensor<4x2x8xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<4x2xf32>, %st: tensor<2x16x8xf32>) {
  // expected-error @+1 {{'lm.kda_chunk' op expects new_state dim 1 (8) to equal state dim 1 (16)}}
  %r:2 = lm.kda_chunk %q, %k, %v, %g, %beta, %st {scale = 0.25 : f64} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x2x8xf32>, tensor<4x2x16xf32>, tensor<4x2xf32>, tensor<2x16x8xf32>) -> (tensor<4x2x8xf32>, tensor<2x8x16xf32>)
  return
}

// -----

// Tests that lm.kda_chunk rejects chunk_size = 0.
func.func @kda_chunk_chunk_size(%q: tensor<4x2x16xf32>, %k: tensor<4x2x16xf32>, %v: tensor<4x2x8xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<4x2xf32>, %st: tensor<2x16x8xf32>) {
  // expected-error @+1 {{'lm.kda_chunk' op expects chunk_size > 0, got 0}}
  %r:2 = lm.kda_chunk %q, %k, %v, %g, %beta, %st {scale = 0.25 : f64, chunk_size = 0 : i64} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x2x8xf32>, tensor<4x2x16xf32>, tensor<4x2xf32>, tensor<2x16x8xf32>) -> (tensor<4x2x8xf32>, tensor<2x16x8xf32>)
  return
}

// -----

// Tests that lm.kda_chunk rejects a bf16 g (ODS: f32).
func.func @kda_chunk_ods_g_bf16(%q: tensor<4x2x16xf32>, %k: tensor<4x2x16xf32>, %v: tensor<4x2x8xf32>, %g: tensor<4x2x16xbf16>, %beta: tensor<4x2xf32>, %st: tensor<2x16x8xf32>) {
  // expected-error @+1 {{'lm.kda_chunk' op operand #3 must be ranked tensor of 32-bit float values, but got 'tensor<4x2x16xbf16>'}}
  %r:2 = lm.kda_chunk %q, %k, %v, %g, %beta, %st {scale = 0.25 : f64} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x2x8xf32>, tensor<4x2x16xbf16>, tensor<4x2xf32>, tensor<2x16x8xf32>) -> (tensor<4x2x8xf32>, tensor<2x16x8xf32>)
  return
}

// -----

// Tests that lm.kda_chunk rejects a bf16 state (ODS: f32; storage is the layout's business).
func.func @kda_chunk_ods_state_bf16(%q: tensor<4x2x16xf32>, %k: tensor<4x2x16xf32>, %v: tensor<4x2x8xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<4x2xf32>, %st: tensor<2x16x8xbf16>) {
  // expected-error @+1 {{'lm.kda_chunk' op operand #5 must be ranked tensor of 32-bit float values, but got 'tensor<2x16x8xbf16>'}}
  %r:2 = lm.kda_chunk %q, %k, %v, %g, %beta, %st {scale = 0.25 : f64} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x2x8xf32>, tensor<4x2x16xf32>, tensor<4x2xf32>, tensor<2x16x8xbf16>) -> (tensor<4x2x8xf32>, tensor<2x16x8xbf16>)
  return
}

// -----

// Tests that lm.kda_chunk rejects a layout that is not an #lm.state_layout (ODS).
func.func @kda_chunk_ods_layout_kind(%q: tensor<4x2x16xf32>, %k: tensor<4x2x16xf32>, %v: tensor<4x2x8xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<4x2xf32>, %st: tensor<2x16x8xf32>) {
  // expected-error @+1 {{'lm.kda_chunk' op attribute 'layout' failed to satisfy constraint: storage layout of a recurrent state slot}}
  %r:2 = lm.kda_chunk %q, %k, %v, %g, %beta, %st {scale = 0.25 : f64, layout = #lm.kv_layout<key_value, page_size = 16, feature_dim = 16, storage = bf16, scale_block = 0, tail_dim = 0, tail = bf16>} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x2x8xf32>, tensor<4x2x16xf32>, tensor<4x2xf32>, tensor<2x16x8xf32>) -> (tensor<4x2x8xf32>, tensor<2x16x8xf32>)
  return
}

// -----

// Tests that lm.short_conv with sequences rejects a state without its slot
// dim ([B, W-1, C]).
func.func @short_conv_slots_rank(%x: tensor<4x16xbf16>, %w: tensor<16x4xbf16>, %st: tensor<3x16xbf16>, %seq: tensor<4xi32>) {
  // expected-error @+1 {{'lm.short_conv' op expects state of rank 3, got 'tensor<3x16xbf16>'}}
  %r:2 = lm.short_conv %x, %w, %st sequences %seq silu : (tensor<4x16xbf16>, tensor<16x4xbf16>, tensor<3x16xbf16>, tensor<4xi32>) -> (tensor<4x16xbf16>, tensor<3x16xbf16>)
  return
}

// -----

// Tests that lm.short_conv rejects sequences of another length than the
// input's tokens.
func.func @short_conv_sequences_length(%x: tensor<4x16xbf16>, %w: tensor<16x4xbf16>, %st: tensor<2x3x16xbf16>, %seq: tensor<5xi32>) {
  // expected-error @+1 {{'lm.short_conv' op expects sequences dim 0 (5) to equal input dim 0 (4)}}
  %r:2 = lm.short_conv %x, %w, %st sequences %seq silu : (tensor<4x16xbf16>, tensor<16x4xbf16>, tensor<2x3x16xbf16>, tensor<5xi32>) -> (tensor<4x16xbf16>, tensor<2x3x16xbf16>)
  return
}

// -----

// Tests that lm.kda_chunk with sequences rejects an unbatched [H, Dk, Dv]
// state (it needs a slot per sequence).
func.func @kda_chunk_slots_rank(%q: tensor<4x2x16xf32>, %k: tensor<4x2x16xf32>, %v: tensor<4x2x8xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<4x2xf32>, %st: tensor<2x16x8xf32>, %seq: tensor<4xi32>) {
  // expected-error @+1 {{'lm.kda_chunk' op expects state of rank 4, got 'tensor<2x16x8xf32>'}}
  %r:2 = lm.kda_chunk %q, %k, %v, %g, %beta, %st sequences %seq {scale = 0.25 : f64} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x2x8xf32>, tensor<4x2x16xf32>, tensor<4x2xf32>, tensor<2x16x8xf32>, tensor<4xi32>) -> (tensor<4x2x8xf32>, tensor<2x16x8xf32>)
  return
}

// -----

// Tests that lm.kda_step with sequences checks the state's head dims (its
// slot count is its own: 3 slots for 4 tokens is fine, 3 heads for q's 2
// is not).
func.func @kda_step_slots_heads(%q: tensor<4x2x16xf32>, %k: tensor<4x2x16xf32>, %v: tensor<4x2x8xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<4x2xf32>, %st: tensor<3x3x16x8xf32>, %seq: tensor<4xi32>) {
  // expected-error @+1 {{'lm.kda_step' op expects state dim 1 (3) to equal q dim 1 (2)}}
  %r:2 = lm.kda_step %q, %k, %v, %g, %beta, %st sequences %seq {scale = 0.25 : f64} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x2x8xf32>, tensor<4x2x16xf32>, tensor<4x2xf32>, tensor<3x3x16x8xf32>, tensor<4xi32>) -> (tensor<4x2x8xf32>, tensor<3x3x16x8xf32>)
  return
}

// -----

// Tests that lm.kda_step rejects an unbatched [H, Dk, Dv] state (that is lm.kda_chunk's).
func.func @kda_step_state_rank(%q: tensor<4x2x16xf32>, %k: tensor<4x2x16xf32>, %v: tensor<4x2x8xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<4x2xf32>, %st: tensor<2x16x8xf32>) {
  // expected-error @+1 {{'lm.kda_step' op expects state of rank 4, got 'tensor<2x16x8xf32>'}}
  %r:2 = lm.kda_step %q, %k, %v, %g, %beta, %st {scale = 0.25 : f64} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x2x8xf32>, tensor<4x2x16xf32>, tensor<4x2xf32>, tensor<2x16x8xf32>) -> (tensor<4x2x8xf32>, tensor<2x16x8xf32>)
  return
}

// -----

// Tests that lm.kda_step rejects a state whose batch differs from q's.
func.func @kda_step_state_batch(%q: tensor<4x2x16xf32>, %k: tensor<4x2x16xf32>, %v: tensor<4x2x8xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<4x2xf32>, %st: tensor<8x2x16x8xf32>) {
  // expected-error @+1 {{'lm.kda_step' op expects state dim 0 (8) to equal q dim 0 (4)}}
  %r:2 = lm.kda_step %q, %k, %v, %g, %beta, %st {scale = 0.25 : f64} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x2x8xf32>, tensor<4x2x16xf32>, tensor<4x2xf32>, tensor<8x2x16x8xf32>) -> (tensor<4x2x8xf32>, tensor<8x2x16x8xf32>)
  return
}

// -----

// Tests that lm.kda_step rejects a state whose head count differs from q's.
func.func @kda_step_state_heads(%q: tensor<4x2x16xf32>, %k: tensor<4x2x16xf32>, %v: tensor<4x2x8xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<4x2xf32>, %st: tensor<4x1x16x8xf32>) {
  // expected-error @+1 {{'lm.kda_step' op expects state dim 1 (1) to equal q dim 1 (2)}}
  %r:2 = lm.kda_step %q, %k, %v, %g, %beta, %st {scale = 0.25 : f64} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x2x8xf32>, tensor<4x2x16xf32>, tensor<4x2xf32>, tensor<4x1x16x8xf32>) -> (tensor<4x2x8xf32>, tensor<4x1x16x8xf32>)
  return
}

// -----

// Tests that lm.kda_step rejects a state whose Dk differs from q's.
func.func @kda_step_state_dk(%q: tensor<4x2x16xf32>, %k: tensor<4x2x16xf32>, %v: tensor<4x2x8xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<4x2xf32>, %st: tensor<4x2x8x8xf32>) {
  // expected-error @+1 {{'lm.kda_step' op expects state dim 2 (8) to equal q dim 2 (16)}}
  %r:2 = lm.kda_step %q, %k, %v, %g, %beta, %st {scale = 0.25 : f64} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x2x8xf32>, tensor<4x2x16xf32>, tensor<4x2xf32>, tensor<4x2x8x8xf32>) -> (tensor<4x2x8xf32>, tensor<4x2x8x8xf32>)
  return
}

// -----

// Tests that lm.kda_step rejects a state whose Dv differs from v's.
func.func @kda_step_state_dv(%q: tensor<4x2x16xf32>, %k: tensor<4x2x16xf32>, %v: tensor<4x2x8xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<4x2xf32>, %st: tensor<4x2x16x16xf32>) {
  // expected-error @+1 {{'lm.kda_step' op expects state dim 3 (16) to equal v dim 2 (8)}}
  %r:2 = lm.kda_step %q, %k, %v, %g, %beta, %st {scale = 0.25 : f64} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x2x8xf32>, tensor<4x2x16xf32>, tensor<4x2xf32>, tensor<4x2x16x16xf32>) -> (tensor<4x2x8xf32>, tensor<4x2x16x16xf32>)
  return
}

// -----

// Tests that lm.kda_step rejects a v whose batch differs from q's.
func.func @kda_step_v_tokens(%q: tensor<4x2x16xf32>, %k: tensor<4x2x16xf32>, %v: tensor<2x2x8xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<4x2xf32>, %st: tensor<4x2x16x8xf32>) {
  // expected-error @+1 {{'lm.kda_step' op expects v dim 0 (2) to equal q dim 0 (4)}}
  %r:2 = lm.kda_step %q, %k, %v, %g, %beta, %st {scale = 0.25 : f64} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<2x2x8xf32>, tensor<4x2x16xf32>, tensor<4x2xf32>, tensor<4x2x16x8xf32>) -> (tensor<2x2x8xf32>, tensor<4x2x16x8xf32>)
  return
}

// -----

// Tests that lm.kda_step rejects a negative scale.
func.func @kda_step_scale(%q: tensor<4x2x16xf32>, %k: tensor<4x2x16xf32>, %v: tensor<4x2x8xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<4x2xf32>, %st: tensor<4x2x16x8xf32>) {
  // expected-error @+1 {{'lm.kda_step' op expects scale > 0, got -1.000000e+00}}
  %r:2 = lm.kda_step %q, %k, %v, %g, %beta, %st {scale = -1.0 : f64} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x2x8xf32>, tensor<4x2x16xf32>, tensor<4x2xf32>, tensor<4x2x16x8xf32>) -> (tensor<4x2x8xf32>, tensor<4x2x16x8xf32>)
  return
}

// -----

// Tests that lm.kda_step rejects a new_state whose shape differs from the state's.
func.func @kda_step_new_state_shape(%q: tensor<4x2x16xf32>, %k: tensor<4x2x16xf32>, %v: tensor<4x2x8xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<4x2xf32>, %st: tensor<4x2x16x8xf32>) {
  // expected-error @+1 {{'lm.kda_step' op expects new_state and state of the same shape, got 'tensor<2x16x8xf32>' and 'tensor<4x2x16x8xf32>'}}
  %r:2 = lm.kda_step %q, %k, %v, %g, %beta, %st {scale = 0.25 : f64} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x2x8xf32>, tensor<4x2x16xf32>, tensor<4x2xf32>, tensor<4x2x16x8xf32>) -> (tensor<4x2x8xf32>, tensor<2x16x8xf32>)
  return
}

// -----

// Tests that #lm.state_layout rejects FP8 storage (on lm.kda_step).
func.func @state_layout_fp8(%q: tensor<4x2x16xf32>, %k: tensor<4x2x16xf32>, %v: tensor<4x2x8xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<4x2xf32>, %st: tensor<4x2x16x8xf32>) {
  // expected-error @+1 {{expects an f32, bf16 or f16 state, got 'f8E4M3FN'}}
  %r:2 = lm.kda_step %q, %k, %v, %g, %beta, %st {scale = 0.25 : f64, layout = #lm.state_layout<storage = f8E4M3FN, key_major = true>} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x2x8xf32>, tensor<4x2x16xf32>, tensor<4x2xf32>, tensor<4x2x16x8xf32>) -> (tensor<4x2x8xf32>, tensor<4x2x16x8xf32>)
  return
}

// -----

// Tests that #lm.state_layout rejects an integer storage type.
func.func @state_layout_int(%q: tensor<4x2x16xf32>, %k: tensor<4x2x16xf32>, %v: tensor<4x2x8xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<4x2xf32>, %st: tensor<4x2x16x8xf32>) {
  // expected-error @+1 {{expects an f32, bf16 or f16 state, got 'i32'}}
  %r:2 = lm.kda_step %q, %k, %v, %g, %beta, %st {scale = 0.25 : f64, layout = #lm.state_layout<storage = i32, key_major = false>} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x2x8xf32>, tensor<4x2x16xf32>, tensor<4x2xf32>, tensor<4x2x16x8xf32>) -> (tensor<4x2x8xf32>, tensor<4x2x16x8xf32>)
  return
}

// -----

// Tests that #lm.state_layout rejects f64 storage.
func.func @state_layout_f64(%q: tensor<4x2x16xf32>, %k: tensor<4x2x16xf32>, %v: tensor<4x2x8xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<4x2xf32>, %st: tensor<2x16x8xf32>) {
  // expected-error @+1 {{expects an f32, bf16 or f16 state, got 'f64'}}
  %r:2 = lm.kda_chunk %q, %k, %v, %g, %beta, %st {scale = 0.25 : f64, layout = #lm.state_layout<storage = f64, key_major = true>} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x2x8xf32>, tensor<4x2x16xf32>, tensor<4x2xf32>, tensor<2x16x8xf32>) -> (tensor<4x2x8xf32>, tensor<2x16x8xf32>)
  return
}

// -----

// Tests that #lm.state_layout rejects a non-boolean key_major.
func.func @state_layout_key_major_kind(%q: tensor<4x2x16xf32>, %k: tensor<4x2x16xf32>, %v: tensor<4x2x8xf32>, %g: tensor<4x2x16xf32>, %beta: tensor<4x2xf32>, %st: tensor<2x16x8xf32>) {
  // expected-error @+2 {{invalid kind of attribute specified}}
  // expected-error @+1 {{failed to parse Lm_StateLayoutAttr parameter 'keyMajor' which is to be a `::mlir::BoolAttr`}}
  %r:2 = lm.kda_chunk %q, %k, %v, %g, %beta, %st {scale = 0.25 : f64, layout = #lm.state_layout<storage = f32, key_major = 1 : i32>} : (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x2x8xf32>, tensor<4x2x16xf32>, tensor<4x2xf32>, tensor<2x16x8xf32>) -> (tensor<4x2x8xf32>, tensor<2x16x8xf32>)
  return
}

// -----

// Tests that lm.block_attn_res rejects an empty source list.
func.func @block_attn_res_no_sources(%n: tensor<16xf32>, %p: tensor<16xf32>) {
  // expected-error @+1 {{'lm.block_attn_res' op expects at least one source}}
  %r = lm.block_attn_res () norm %n proj %p {eps = 1.0e-05 : f64} : (tensor<16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return
}

// -----

// Tests that lm.block_attn_res rejects a first source that is not rank 2 ([T, D]).
func.func @block_attn_res_source_rank(%b0: tensor<2x4x16xf32>, %n: tensor<16xf32>, %p: tensor<16xf32>) {
  // expected-error @+1 {{'lm.block_attn_res' op expects source 0 of rank 2, got 'tensor<2x4x16xf32>'}}
  %r = lm.block_attn_res (%b0) norm %n proj %p {eps = 1.0e-05 : f64} : (tensor<2x4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  return
}

// -----

// Tests that lm.block_attn_res rejects a second source of another rank, naming it.
func.func @block_attn_res_source_shape(%b0: tensor<4x16xf32>, %b1: tensor<64xf32>, %n: tensor<16xf32>, %p: tensor<16xf32>) {
  // expected-error @+1 {{'lm.block_attn_res' op expects source 1 and source 0 of the same shape, got 'tensor<64xf32>' and 'tensor<4x16xf32>'}}
  %r = lm.block_attn_res (%b0, %b1) norm %n proj %p {eps = 1.0e-05 : f64} : (tensor<4x16xf32>, tensor<64xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return
}

// -----

// Tests that lm.block_attn_res rejects a third source of another token count, naming it.
func.func @block_attn_res_source_dim(%b0: tensor<4x16xf32>, %b1: tensor<4x16xf32>, %b2: tensor<5x16xf32>, %n: tensor<16xf32>, %p: tensor<16xf32>) {
  // expected-error @+1 {{'lm.block_attn_res' op expects source 2 dim 0 (5) to equal source 0 dim 0 (4)}}
  %r = lm.block_attn_res (%b0, %b1, %b2) norm %n proj %p {eps = 1.0e-05 : f64} : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<5x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return
}

// -----

// Tests that lm.block_attn_res rejects a norm weight that is not rank 1.
func.func @block_attn_res_norm_rank(%b0: tensor<4x16xf32>, %b1: tensor<4x16xf32>, %n: tensor<1x16xf32>, %p: tensor<16xf32>) {
  // expected-error @+1 {{'lm.block_attn_res' op expects norm of rank 1, got 'tensor<1x16xf32>'}}
  %r = lm.block_attn_res (%b0, %b1) norm %n proj %p {eps = 1.0e-05 : f64} : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<1x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return
}

// -----

// Tests that lm.block_attn_res rejects a proj that is not rank 1.
func.func @block_attn_res_proj_rank(%b0: tensor<4x16xf32>, %b1: tensor<4x16xf32>, %n: tensor<16xf32>, %p: tensor<16x1xf32>) {
  // expected-error @+1 {{'lm.block_attn_res' op expects proj of rank 1, got 'tensor<16x1xf32>'}}
  %r = lm.block_attn_res (%b0, %b1) norm %n proj %p {eps = 1.0e-05 : f64} : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<16xf32>, tensor<16x1xf32>) -> tensor<4x16xf32>
  return
}

// -----

// Tests that lm.block_attn_res rejects a norm weight whose size differs from the sources' width.
func.func @block_attn_res_norm_dim(%b0: tensor<4x16xf32>, %b1: tensor<4x16xf32>, %n: tensor<8xf32>, %p: tensor<16xf32>) {
  // expected-error @+1 {{'lm.block_attn_res' op expects norm dim 0 (8) to equal source 0 dim 1 (16)}}
  %r = lm.block_attn_res (%b0, %b1) norm %n proj %p {eps = 1.0e-05 : f64} : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return
}

// -----

// Tests that lm.block_attn_res rejects a proj whose size differs from the sources' width.
func.func @block_attn_res_proj_dim(%b0: tensor<4x16xf32>, %b1: tensor<4x16xf32>, %n: tensor<16xf32>, %p: tensor<32xf32>) {
  // expected-error @+1 {{'lm.block_attn_res' op expects proj dim 0 (32) to equal source 0 dim 1 (16)}}
  %r = lm.block_attn_res (%b0, %b1) norm %n proj %p {eps = 1.0e-05 : f64} : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<16xf32>, tensor<32xf32>) -> tensor<4x16xf32>
  return
}

// -----

// Tests that lm.block_attn_res rejects eps = 0.
func.func @block_attn_res_eps(%b0: tensor<4x16xf32>, %b1: tensor<4x16xf32>, %n: tensor<16xf32>, %p: tensor<16xf32>) {
  // expected-error @+1 {{'lm.block_attn_res' op expects eps > 0, got 0.000000e+00}}
  %r = lm.block_attn_res (%b0, %b1) norm %n proj %p {eps = 0.0 : f64} : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return
}

// -----

// Tests that lm.block_attn_res rejects a result whose shape differs from the sources'.
func.func @block_attn_res_result(%b0: tensor<4x16xf32>, %b1: tensor<4x16xf32>, %n: tensor<16xf32>, %p: tensor<16xf32>) {
  // expected-error @+1 {{'lm.block_attn_res' op expects result dim 1 (32) to equal source 0 dim 1 (16)}}
  %r = lm.block_attn_res (%b0, %b1) norm %n proj %p {eps = 1.0e-05 : f64} : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x32xf32>
  return
}

// -----

// Tests that lm.mhc_pre rejects streams that are not rank 3 ([T, n, D]).
func.func @mhc_pre_streams_rank(%streams: tensor<4x16xf32>, %fn: tensor<8x16xf32>, %base: tensor<8xf32>, %scale: tensor<3xf32>) {
  // expected-error @+1 {{'lm.mhc_pre' op expects streams of rank 3, got 'tensor<4x16xf32>'}}
  %r:3 = lm.mhc_pre %streams, %fn, %base, %scale {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64} : (tensor<4x16xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<3xf32>) -> (tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x2x2xf32>)
  return
}

// -----

// Tests that lm.mhc_pre rejects a stream count whose (2 + n) * n mix logits overflow 64 bits.
func.func @mhc_pre_streams_overflow(%streams: tensor<1x4000000000x1xf32>, %fn: tensor<8x16xf32>, %base: tensor<8xf32>, %scale: tensor<3xf32>) {
  // expected-error @+1 {{'lm.mhc_pre' op expects (2 + n) * n mix logits to fit in 64 bits, got n = 4000000000}}
  %r:3 = lm.mhc_pre %streams, %fn, %base, %scale {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64} : (tensor<1x4000000000x1xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<3xf32>) -> (tensor<1x1xf32>, tensor<1x4000000000xf32>, tensor<1x4000000000x4000000000xf32>)
  return
}

// -----

// Tests that lm.mhc_pre rejects streams whose n * D flattened width overflows 64 bits.
func.func @mhc_pre_flat_overflow(%streams: tensor<1x2x5000000000000000000xf32>, %fn: tensor<8x16xf32>, %base: tensor<8xf32>, %scale: tensor<3xf32>) {
  // expected-error @+1 {{'lm.mhc_pre' op expects n * D flattened streams to fit in 64 bits, got n = 2, D = 5000000000000000000}}
  %r:3 = lm.mhc_pre %streams, %fn, %base, %scale {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64} : (tensor<1x2x5000000000000000000xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<3xf32>) -> (tensor<1x5000000000000000000xf32>, tensor<1x2xf32>, tensor<1x2x2xf32>)
  return
}

// -----

// Tests that lm.mhc_pre rejects an fn that is not rank 2.
func.func @mhc_pre_fn_rank(%streams: tensor<4x2x8xf32>, %fn: tensor<128xf32>, %base: tensor<8xf32>, %scale: tensor<3xf32>) {
  // expected-error @+1 {{'lm.mhc_pre' op expects fn of rank 2, got 'tensor<128xf32>'}}
  %r:3 = lm.mhc_pre %streams, %fn, %base, %scale {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64} : (tensor<4x2x8xf32>, tensor<128xf32>, tensor<8xf32>, tensor<3xf32>) -> (tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x2x2xf32>)
  return
}

// -----

// Tests that lm.mhc_pre rejects a base that is not rank 1.
func.func @mhc_pre_base_rank(%streams: tensor<4x2x8xf32>, %fn: tensor<8x16xf32>, %base: tensor<4x2xf32>, %scale: tensor<3xf32>) {
  // expected-error @+1 {{'lm.mhc_pre' op expects base of rank 1, got 'tensor<4x2xf32>'}}
  %r:3 = lm.mhc_pre %streams, %fn, %base, %scale {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64} : (tensor<4x2x8xf32>, tensor<8x16xf32>, tensor<4x2xf32>, tensor<3xf32>) -> (tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x2x2xf32>)
  return
}

// -----

// Tests that lm.mhc_pre rejects a scale that is not rank 1.
func.func @mhc_pre_scale_rank(%streams: tensor<4x2x8xf32>, %fn: tensor<8x16xf32>, %base: tensor<8xf32>, %scale: tensor<f32>) {
  // expected-error @+1 {{'lm.mhc_pre' op expects scale of rank 1, got 'tensor<f32>'}}
  %r:3 = lm.mhc_pre %streams, %fn, %base, %scale {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64} : (tensor<4x2x8xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<f32>) -> (tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x2x2xf32>)
  return
}

// -----

// Tests that lm.mhc_pre rejects a scale with other than the 3 pre/post/comb scales.
func.func @mhc_pre_scale_dim(%streams: tensor<4x2x8xf32>, %fn: tensor<8x16xf32>, %base: tensor<8xf32>, %scale: tensor<2xf32>) {
  // expected-error @+1 {{'lm.mhc_pre' op expects scale dim 0 to be 3 (pre, post and comb scales), got 2}}
  %r:3 = lm.mhc_pre %streams, %fn, %base, %scale {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64} : (tensor<4x2x8xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<2xf32>) -> (tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x2x2xf32>)
  return
}

// -----

// Tests that lm.mhc_pre rejects an fn with other than (2 + n) * n rows.
func.func @mhc_pre_fn_rows(%streams: tensor<4x2x8xf32>, %fn: tensor<6x16xf32>, %base: tensor<8xf32>, %scale: tensor<3xf32>) {
  // expected-error @+1 {{'lm.mhc_pre' op expects fn dim 0 to be 8 ((2 + n) * n mix logits), got 6}}
  %r:3 = lm.mhc_pre %streams, %fn, %base, %scale {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64} : (tensor<4x2x8xf32>, tensor<6x16xf32>, tensor<8xf32>, tensor<3xf32>) -> (tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x2x2xf32>)
  return
}

// -----

// Tests that lm.mhc_pre rejects a base with other than (2 + n) * n entries.
func.func @mhc_pre_base_dim(%streams: tensor<4x2x8xf32>, %fn: tensor<8x16xf32>, %base: tensor<4xf32>, %scale: tensor<3xf32>) {
  // expected-error @+1 {{'lm.mhc_pre' op expects base dim 0 to be 8 ((2 + n) * n mix logits), got 4}}
  %r:3 = lm.mhc_pre %streams, %fn, %base, %scale {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64} : (tensor<4x2x8xf32>, tensor<8x16xf32>, tensor<4xf32>, tensor<3xf32>) -> (tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x2x2xf32>)
  return
}

// -----

// Tests that lm.mhc_pre rejects an fn with other than n * D columns.
func.func @mhc_pre_fn_cols(%streams: tensor<4x2x8xf32>, %fn: tensor<8x8xf32>, %base: tensor<8xf32>, %scale: tensor<3xf32>) {
  // expected-error @+1 {{'lm.mhc_pre' op expects fn dim 1 to be 16 (n * D flattened streams), got 8}}
  %r:3 = lm.mhc_pre %streams, %fn, %base, %scale {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64} : (tensor<4x2x8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<3xf32>) -> (tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x2x2xf32>)
  return
}

// -----

// Tests that lm.mhc_pre rejects sinkhorn_iters = 0.
func.func @mhc_pre_sinkhorn_iters(%streams: tensor<4x2x8xf32>, %fn: tensor<8x16xf32>, %base: tensor<8xf32>, %scale: tensor<3xf32>) {
  // expected-error @+1 {{'lm.mhc_pre' op expects sinkhorn_iters > 0, got 0}}
  %r:3 = lm.mhc_pre %streams, %fn, %base, %scale {sinkhorn_iters = 0 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64} : (tensor<4x2x8xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<3xf32>) -> (tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x2x2xf32>)
  return
}

// -----

// Tests that lm.mhc_pre rejects eps = 0.
func.func @mhc_pre_eps(%streams: tensor<4x2x8xf32>, %fn: tensor<8x16xf32>, %base: tensor<8xf32>, %scale: tensor<3xf32>) {
  // expected-error @+1 {{'lm.mhc_pre' op expects eps > 0, got 0.000000e+00}}
  %r:3 = lm.mhc_pre %streams, %fn, %base, %scale {sinkhorn_iters = 20 : i64, eps = 0.0 : f64, norm_eps = 1.0e-06 : f64} : (tensor<4x2x8xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<3xf32>) -> (tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x2x2xf32>)
  return
}

// -----

// Tests that lm.mhc_pre rejects a negative norm_eps.
func.func @mhc_pre_norm_eps(%streams: tensor<4x2x8xf32>, %fn: tensor<8x16xf32>, %base: tensor<8xf32>, %scale: tensor<3xf32>) {
  // expected-error @+1 {{'lm.mhc_pre' op expects norm_eps > 0, got -1.000000e+00}}
  %r:3 = lm.mhc_pre %streams, %fn, %base, %scale {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = -1.0 : f64} : (tensor<4x2x8xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<3xf32>) -> (tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x2x2xf32>)
  return
}

// -----

// Tests that lm.mhc_pre rejects an input result that is not rank 2.
func.func @mhc_pre_input_rank(%streams: tensor<4x2x8xf32>, %fn: tensor<8x16xf32>, %base: tensor<8xf32>, %scale: tensor<3xf32>) {
  // expected-error @+1 {{'lm.mhc_pre' op expects input of rank 2, got 'tensor<4x1x8xf32>'}}
  %r:3 = lm.mhc_pre %streams, %fn, %base, %scale {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64} : (tensor<4x2x8xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<3xf32>) -> (tensor<4x1x8xf32>, tensor<4x2xf32>, tensor<4x2x2xf32>)
  return
}

// -----

// Tests that lm.mhc_pre rejects an input result whose token count differs from the streams'.
func.func @mhc_pre_input_tokens(%streams: tensor<4x2x8xf32>, %fn: tensor<8x16xf32>, %base: tensor<8xf32>, %scale: tensor<3xf32>) {
  // expected-error @+1 {{'lm.mhc_pre' op expects input dim 0 (2) to equal streams dim 0 (4)}}
  %r:3 = lm.mhc_pre %streams, %fn, %base, %scale {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64} : (tensor<4x2x8xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<3xf32>) -> (tensor<2x8xf32>, tensor<4x2xf32>, tensor<4x2x2xf32>)
  return
}

// -----

// Tests that lm.mhc_pre rejects an input result of width n * D instead of D.
func.func @mhc_pre_input_width(%streams: tensor<4x2x8xf32>, %fn: tensor<8x16xf32>, %base: tensor<8xf32>, %scale: tensor<3xf32>) {
  // expected-error @+1 {{'lm.mhc_pre' op expects input dim 1 (16) to equal streams dim 2 (8)}}
  %r:3 = lm.mhc_pre %streams, %fn, %base, %scale {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64} : (tensor<4x2x8xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<3xf32>) -> (tensor<4x16xf32>, tensor<4x2xf32>, tensor<4x2x2xf32>)
  return
}

// -----

// Tests that lm.mhc_pre rejects a norm weight of another width than D.
func.func @mhc_pre_norm_width(%streams: tensor<4x2x8xf32>, %fn: tensor<8x16xf32>, %base: tensor<8xf32>, %scale: tensor<3xf32>, %w: tensor<16xf32>) {
  // expected-error @+1 {{'lm.mhc_pre' op expects norm dim 0 (16) to equal streams dim 2 (8)}}
  %r:3 = lm.mhc_pre %streams, %fn, %base, %scale norm %w {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64, input_eps = 1.0e-05 : f64} : (tensor<4x2x8xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<3xf32>, tensor<16xf32>) -> (tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x2x2xf32>)
  return
}

// -----

// Tests that lm.mhc_pre rejects a norm without its eps.
func.func @mhc_pre_norm_without_eps(%streams: tensor<4x2x8xf32>, %fn: tensor<8x16xf32>, %base: tensor<8xf32>, %scale: tensor<3xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'lm.mhc_pre' op expects input_eps with a norm}}
  %r:3 = lm.mhc_pre %streams, %fn, %base, %scale norm %w {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64} : (tensor<4x2x8xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<3xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x2x2xf32>)
  return
}

// -----

// Tests that lm.mhc_pre rejects an input_eps without a norm.
func.func @mhc_pre_eps_without_norm(%streams: tensor<4x2x8xf32>, %fn: tensor<8x16xf32>, %base: tensor<8xf32>, %scale: tensor<3xf32>) {
  // expected-error @+1 {{'lm.mhc_pre' op expects input_eps only with a norm}}
  %r:3 = lm.mhc_pre %streams, %fn, %base, %scale {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64, input_eps = 1.0e-05 : f64} : (tensor<4x2x8xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<3xf32>) -> (tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x2x2xf32>)
  return
}

// -----

// Tests that lm.mhc_post_pre rejects new streams of another shape than the old.
func.func @mhc_post_pre_result(%streams: tensor<4x2x8xf32>, %y: tensor<4x8xf32>, %post: tensor<4x2xf32>, %comb: tensor<4x2x2xf32>, %fn: tensor<8x16xf32>, %base: tensor<8xf32>, %scale: tensor<3xf32>) {
  // expected-error @+1 {{'lm.mhc_post_pre' op expects result}}
  %r:4 = lm.mhc_post_pre %streams, %y, %post, %comb, %fn, %base, %scale {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64} : (tensor<4x2x8xf32>, tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x2x2xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<3xf32>) -> (tensor<3x2x8xf32>, tensor<3x8xf32>, tensor<3x2xf32>, tensor<3x2x2xf32>)
  return
}

// -----

// Tests that lm.mhc_post_pre checks its collapse's results like lm.mhc_pre.
func.func @mhc_post_pre_comb(%streams: tensor<4x2x8xf32>, %y: tensor<4x8xf32>, %post: tensor<4x2xf32>, %comb: tensor<4x2x2xf32>, %fn: tensor<8x16xf32>, %base: tensor<8xf32>, %scale: tensor<3xf32>) {
  // expected-error @+1 {{'lm.mhc_post_pre' op expects comb dim 2 (3) to equal streams dim 1 (2)}}
  %r:4 = lm.mhc_post_pre %streams, %y, %post, %comb, %fn, %base, %scale {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64} : (tensor<4x2x8xf32>, tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x2x2xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<3xf32>) -> (tensor<4x2x8xf32>, tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x2x3xf32>)
  return
}

// -----

// Tests that lm.mhc_pre rejects a post that is not rank 2.
func.func @mhc_pre_post_rank(%streams: tensor<4x2x8xf32>, %fn: tensor<8x16xf32>, %base: tensor<8xf32>, %scale: tensor<3xf32>) {
  // expected-error @+1 {{'lm.mhc_pre' op expects post of rank 2, got 'tensor<4x2x1xf32>'}}
  %r:3 = lm.mhc_pre %streams, %fn, %base, %scale {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64} : (tensor<4x2x8xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<3xf32>) -> (tensor<4x8xf32>, tensor<4x2x1xf32>, tensor<4x2x2xf32>)
  return
}

// -----

// Tests that lm.mhc_pre rejects a post whose token count differs from the streams'.
func.func @mhc_pre_post_tokens(%streams: tensor<4x2x8xf32>, %fn: tensor<8x16xf32>, %base: tensor<8xf32>, %scale: tensor<3xf32>) {
  // expected-error @+1 {{'lm.mhc_pre' op expects post dim 0 (1) to equal streams dim 0 (4)}}
  %r:3 = lm.mhc_pre %streams, %fn, %base, %scale {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64} : (tensor<4x2x8xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<3xf32>) -> (tensor<4x8xf32>, tensor<1x2xf32>, tensor<4x2x2xf32>)
  return
}

// -----

// Tests that lm.mhc_pre rejects a post whose size differs from the stream count.
func.func @mhc_pre_post_streams(%streams: tensor<4x2x8xf32>, %fn: tensor<8x16xf32>, %base: tensor<8xf32>, %scale: tensor<3xf32>) {
  // expected-error @+1 {{'lm.mhc_pre' op expects post dim 1 (3) to equal streams dim 1 (2)}}
  %r:3 = lm.mhc_pre %streams, %fn, %base, %scale {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64} : (tensor<4x2x8xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<3xf32>) -> (tensor<4x8xf32>, tensor<4x3xf32>, tensor<4x2x2xf32>)
  return
}

// -----

// Tests that lm.mhc_pre rejects a comb that is not rank 3.
func.func @mhc_pre_comb_rank(%streams: tensor<4x2x8xf32>, %fn: tensor<8x16xf32>, %base: tensor<8xf32>, %scale: tensor<3xf32>) {
  // expected-error @+1 {{'lm.mhc_pre' op expects comb of rank 3, got 'tensor<4x4xf32>'}}
  %r:3 = lm.mhc_pre %streams, %fn, %base, %scale {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64} : (tensor<4x2x8xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<3xf32>) -> (tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x4xf32>)
  return
}

// -----

// Tests that lm.mhc_pre rejects a comb whose token count differs from the streams'.
func.func @mhc_pre_comb_tokens(%streams: tensor<4x2x8xf32>, %fn: tensor<8x16xf32>, %base: tensor<8xf32>, %scale: tensor<3xf32>) {
  // expected-error @+1 {{'lm.mhc_pre' op expects comb dim 0 (8) to equal streams dim 0 (4)}}
  %r:3 = lm.mhc_pre %streams, %fn, %base, %scale {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64} : (tensor<4x2x8xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<3xf32>) -> (tensor<4x8xf32>, tensor<4x2xf32>, tensor<8x2x2xf32>)
  return
}

// -----

// Tests that lm.mhc_pre rejects a comb whose rows differ from the stream count.
func.func @mhc_pre_comb_rows(%streams: tensor<4x2x8xf32>, %fn: tensor<8x16xf32>, %base: tensor<8xf32>, %scale: tensor<3xf32>) {
  // expected-error @+1 {{'lm.mhc_pre' op expects comb dim 1 (3) to equal streams dim 1 (2)}}
  %r:3 = lm.mhc_pre %streams, %fn, %base, %scale {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64} : (tensor<4x2x8xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<3xf32>) -> (tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x3x2xf32>)
  return
}

// -----

// Tests that lm.mhc_pre rejects a comb whose columns differ from the stream count.
func.func @mhc_pre_comb_cols(%streams: tensor<4x2x8xf32>, %fn: tensor<8x16xf32>, %base: tensor<8xf32>, %scale: tensor<3xf32>) {
  // expected-error @+1 {{'lm.mhc_pre' op expects comb dim 2 (3) to equal streams dim 1 (2)}}
  %r:3 = lm.mhc_pre %streams, %fn, %base, %scale {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64} : (tensor<4x2x8xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<3xf32>) -> (tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x2x3xf32>)
  return
}

// -----

// Tests that lm.mhc_pre rejects a bf16 post (ODS: f32).
func.func @mhc_pre_ods_post_bf16(%streams: tensor<4x2x8xf32>, %fn: tensor<8x16xf32>, %base: tensor<8xf32>, %scale: tensor<3xf32>) {
  // expected-error @+1 {{'lm.mhc_pre' op result #1 must be ranked tensor of 32-bit float values, but got 'tensor<4x2xbf16>'}}
  %r:3 = lm.mhc_pre %streams, %fn, %base, %scale {sinkhorn_iters = 20 : i64, eps = 1.0e-06 : f64, norm_eps = 1.0e-06 : f64} : (tensor<4x2x8xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<3xf32>) -> (tensor<4x8xf32>, tensor<4x2xbf16>, tensor<4x2x2xf32>)
  return
}

// -----

// Tests that lm.mhc_post rejects streams that are not rank 3.
func.func @mhc_post_streams_rank(%streams: tensor<4x16xf32>, %y: tensor<4x8xf32>, %post: tensor<4x2xf32>, %comb: tensor<4x2x2xf32>) {
  // expected-error @+1 {{'lm.mhc_post' op expects streams of rank 3, got 'tensor<4x16xf32>'}}
  %r = lm.mhc_post %streams, %y, %post, %comb : (tensor<4x16xf32>, tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x2x2xf32>) -> tensor<4x16xf32>
  return
}

// -----

// Tests that lm.mhc_post rejects a y that is not rank 2.
func.func @mhc_post_y_rank(%streams: tensor<4x2x8xf32>, %y: tensor<4x1x8xf32>, %post: tensor<4x2xf32>, %comb: tensor<4x2x2xf32>) {
  // expected-error @+1 {{'lm.mhc_post' op expects y of rank 2, got 'tensor<4x1x8xf32>'}}
  %r = lm.mhc_post %streams, %y, %post, %comb : (tensor<4x2x8xf32>, tensor<4x1x8xf32>, tensor<4x2xf32>, tensor<4x2x2xf32>) -> tensor<4x2x8xf32>
  return
}

// -----

// Tests that lm.mhc_post rejects a y whose token count differs from the streams'.
func.func @mhc_post_y_tokens(%streams: tensor<4x2x8xf32>, %y: tensor<3x8xf32>, %post: tensor<4x2xf32>, %comb: tensor<4x2x2xf32>) {
  // expected-error @+1 {{'lm.mhc_post' op expects y dim 0 (3) to equal streams dim 0 (4)}}
  %r = lm.mhc_post %streams, %y, %post, %comb : (tensor<4x2x8xf32>, tensor<3x8xf32>, tensor<4x2xf32>, tensor<4x2x2xf32>) -> tensor<4x2x8xf32>
  return
}

// -----

// Tests that lm.mhc_post rejects a y whose width differs from the streams'.
func.func @mhc_post_y_width(%streams: tensor<4x2x8xf32>, %y: tensor<4x16xf32>, %post: tensor<4x2xf32>, %comb: tensor<4x2x2xf32>) {
  // expected-error @+1 {{'lm.mhc_post' op expects y dim 1 (16) to equal streams dim 2 (8)}}
  %r = lm.mhc_post %streams, %y, %post, %comb : (tensor<4x2x8xf32>, tensor<4x16xf32>, tensor<4x2xf32>, tensor<4x2x2xf32>) -> tensor<4x2x8xf32>
  return
}

// -----

// Tests that lm.mhc_post rejects a post that is not rank 2.
func.func @mhc_post_post_rank(%streams: tensor<4x2x8xf32>, %y: tensor<4x8xf32>, %post: tensor<8xf32>, %comb: tensor<4x2x2xf32>) {
  // expected-error @+1 {{'lm.mhc_post' op expects post of rank 2, got 'tensor<8xf32>'}}
  %r = lm.mhc_post %streams, %y, %post, %comb : (tensor<4x2x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<4x2x2xf32>) -> tensor<4x2x8xf32>
  return
}

// -----

// Tests that lm.mhc_post rejects a post whose token count differs from the streams'.
func.func @mhc_post_post_tokens(%streams: tensor<4x2x8xf32>, %y: tensor<4x8xf32>, %post: tensor<2x2xf32>, %comb: tensor<4x2x2xf32>) {
  // expected-error @+1 {{'lm.mhc_post' op expects post dim 0 (2) to equal streams dim 0 (4)}}
  %r = lm.mhc_post %streams, %y, %post, %comb : (tensor<4x2x8xf32>, tensor<4x8xf32>, tensor<2x2xf32>, tensor<4x2x2xf32>) -> tensor<4x2x8xf32>
  return
}

// -----

// Tests that lm.mhc_post rejects a post whose size differs from the stream count.
func.func @mhc_post_post_streams(%streams: tensor<4x2x8xf32>, %y: tensor<4x8xf32>, %post: tensor<4x4xf32>, %comb: tensor<4x2x2xf32>) {
  // expected-error @+1 {{'lm.mhc_post' op expects post dim 1 (4) to equal streams dim 1 (2)}}
  %r = lm.mhc_post %streams, %y, %post, %comb : (tensor<4x2x8xf32>, tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x2x2xf32>) -> tensor<4x2x8xf32>
  return
}

// -----

// Tests that lm.mhc_post rejects a comb that is not rank 3.
func.func @mhc_post_comb_rank(%streams: tensor<4x2x8xf32>, %y: tensor<4x8xf32>, %post: tensor<4x2xf32>, %comb: tensor<4x4xf32>) {
  // expected-error @+1 {{'lm.mhc_post' op expects comb of rank 3, got 'tensor<4x4xf32>'}}
  %r = lm.mhc_post %streams, %y, %post, %comb : (tensor<4x2x8xf32>, tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x4xf32>) -> tensor<4x2x8xf32>
  return
}

// -----

// Tests that lm.mhc_post rejects a comb whose token count differs from the streams'.
func.func @mhc_post_comb_tokens(%streams: tensor<4x2x8xf32>, %y: tensor<4x8xf32>, %post: tensor<4x2xf32>, %comb: tensor<5x2x2xf32>) {
  // expected-error @+1 {{'lm.mhc_post' op expects comb dim 0 (5) to equal streams dim 0 (4)}}
  %r = lm.mhc_post %streams, %y, %post, %comb : (tensor<4x2x8xf32>, tensor<4x8xf32>, tensor<4x2xf32>, tensor<5x2x2xf32>) -> tensor<4x2x8xf32>
  return
}

// -----

// Tests that lm.mhc_post rejects a comb whose rows differ from the stream count.
func.func @mhc_post_comb_rows(%streams: tensor<4x2x8xf32>, %y: tensor<4x8xf32>, %post: tensor<4x2xf32>, %comb: tensor<4x1x2xf32>) {
  // expected-error @+1 {{'lm.mhc_post' op expects comb dim 1 (1) to equal streams dim 1 (2)}}
  %r = lm.mhc_post %streams, %y, %post, %comb : (tensor<4x2x8xf32>, tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x1x2xf32>) -> tensor<4x2x8xf32>
  return
}

// -----

// Tests that lm.mhc_post rejects a comb whose columns differ from the stream count.
func.func @mhc_post_comb_cols(%streams: tensor<4x2x8xf32>, %y: tensor<4x8xf32>, %post: tensor<4x2xf32>, %comb: tensor<4x2x4xf32>) {
  // expected-error @+1 {{'lm.mhc_post' op expects comb dim 2 (4) to equal streams dim 1 (2)}}
  %r = lm.mhc_post %streams, %y, %post, %comb : (tensor<4x2x8xf32>, tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x2x4xf32>) -> tensor<4x2x8xf32>
  return
}

// -----

// Tests that lm.mhc_post rejects a result whose shape differs from the streams'.
func.func @mhc_post_result(%streams: tensor<4x2x8xf32>, %y: tensor<4x8xf32>, %post: tensor<4x2xf32>, %comb: tensor<4x2x2xf32>) {
  // expected-error @+1 {{'lm.mhc_post' op expects result and streams of the same shape, got 'tensor<4x8xf32>' and 'tensor<4x2x8xf32>'}}
  %r = lm.mhc_post %streams, %y, %post, %comb : (tensor<4x2x8xf32>, tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x2x2xf32>) -> tensor<4x8xf32>
  return
}

// -----

// Tests that lm.mhc_post rejects a result whose dims differ from the streams'.
func.func @mhc_post_result_dim(%streams: tensor<4x2x8xf32>, %y: tensor<4x8xf32>, %post: tensor<4x2xf32>, %comb: tensor<4x2x2xf32>) {
  // expected-error @+1 {{'lm.mhc_post' op expects result dim 1 (3) to equal streams dim 1 (2)}}
  %r = lm.mhc_post %streams, %y, %post, %comb : (tensor<4x2x8xf32>, tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x2x2xf32>) -> tensor<4x3x8xf32>
  return
}

// -----

// Tests that lm.mhc_post rejects a bf16 comb (ODS: f32).
func.func @mhc_post_ods_comb_bf16(%streams: tensor<4x2x8xf32>, %y: tensor<4x8xf32>, %post: tensor<4x2xf32>, %comb: tensor<4x2x2xbf16>) {
  // expected-error @+1 {{'lm.mhc_post' op operand #3 must be ranked tensor of 32-bit float values, but got 'tensor<4x2x2xbf16>'}}
  %r = lm.mhc_post %streams, %y, %post, %comb : (tensor<4x2x8xf32>, tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x2x2xbf16>) -> tensor<4x2x8xf32>
  return
}

// -----

// Tests that lm.embedding rejects a table that is not rank 2 ([V, D]).
func.func @embedding_table_rank(%table: tensor<512xbf16>, %ids: tensor<4xi32>) {
  // expected-error @+1 {{'lm.embedding' op expects table of rank 2, got 'tensor<512xbf16>'}}
  %r = lm.embedding %table, %ids : (tensor<512xbf16>, tensor<4xi32>) -> tensor<4x16xbf16>
  return
}

// -----

// Tests that lm.embedding rejects ids that are not rank 1.
func.func @embedding_ids_rank(%table: tensor<32x16xbf16>, %ids: tensor<1x4xi32>) {
  // expected-error @+1 {{'lm.embedding' op expects ids of rank 1, got 'tensor<1x4xi32>'}}
  %r = lm.embedding %table, %ids : (tensor<32x16xbf16>, tensor<1x4xi32>) -> tensor<4x16xbf16>
  return
}

// -----

// Tests that lm.embedding rejects a result that is not rank 2.
func.func @embedding_result_rank(%table: tensor<32x16xbf16>, %ids: tensor<4xi32>) {
  // expected-error @+1 {{'lm.embedding' op expects result of rank 2, got 'tensor<1x4x16xbf16>'}}
  %r = lm.embedding %table, %ids : (tensor<32x16xbf16>, tensor<4xi32>) -> tensor<1x4x16xbf16>
  return
}

// -----

// Tests that lm.embedding rejects a result whose row count differs from the ids'.
func.func @embedding_result_tokens(%table: tensor<32x16xbf16>, %ids: tensor<4xi32>) {
  // expected-error @+1 {{'lm.embedding' op expects result dim 0 (32) to equal ids dim 0 (4)}}
  %r = lm.embedding %table, %ids : (tensor<32x16xbf16>, tensor<4xi32>) -> tensor<32x16xbf16>
  return
}

// -----

// Tests that lm.embedding rejects a result whose width differs from the table's.
func.func @embedding_result_width(%table: tensor<32x16xbf16>, %ids: tensor<4xi32>) {
  // expected-error @+1 {{'lm.embedding' op expects result dim 1 (32) to equal table dim 1 (16)}}
  %r = lm.embedding %table, %ids : (tensor<32x16xbf16>, tensor<4xi32>) -> tensor<4x32xbf16>
  return
}

// -----

// Tests that lm.embedding rejects float ids (ODS: i32 or i64).
func.func @embedding_ods_ids_f32(%table: tensor<32x16xbf16>, %ids: tensor<4xf32>) {
  // expected-error @+1 {{'lm.embedding' op operand #1 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xf32>'}}
  %r = lm.embedding %table, %ids : (tensor<32x16xbf16>, tensor<4xf32>) -> tensor<4x16xbf16>
  return
}

// -----

// Tests that lm.embedding rejects index-typed ids (ODS: i32 or i64).
func.func @embedding_ods_ids_index(%table: tensor<32x16xbf16>, %ids: tensor<4xindex>) {
  // expected-error @+1 {{'lm.embedding' op operand #1 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xindex>'}}
  %r = lm.embedding %table, %ids : (tensor<32x16xbf16>, tensor<4xindex>) -> tensor<4x16xbf16>
  return
}

// -----

// Tests that lm.cache_write rejects a norm without its weight.
func.func @cache_write_prologue_0(%cache: tensor<10x16xf32>, %vals: tensor<4x16xf32>, %slots: tensor<4xi32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'lm.cache_write' op expects norm, norm_dim, eps and the norm weight together or not at all}}
  %r = lm.cache_write %cache, %vals, %slots {norm = #lm<norm_kind rms>, norm_dim = 8 : i64, eps = 1.0e-06 : f64} : (tensor<10x16xf32>, tensor<4x16xf32>, tensor<4xi32>) -> tensor<10x16xf32>
  return
}

// -----

// Tests that lm.cache_write rejects a norm bias on an RMS norm.
func.func @cache_write_prologue_1(%cache: tensor<10x16xf32>, %vals: tensor<4x16xf32>, %slots: tensor<4xi32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'lm.cache_write' op expects a norm bias only with a layer norm}}
  %r = lm.cache_write %cache, %vals, %slots norm %w bias %w {norm = #lm<norm_kind rms>, norm_dim = 8 : i64, eps = 1.0e-06 : f64} : (tensor<10x16xf32>, tensor<4x16xf32>, tensor<4xi32>, tensor<8xf32>, tensor<8xf32>) -> tensor<10x16xf32>
  return
}

// -----

// Tests that lm.cache_write rejects a norm wider than the row.
func.func @cache_write_prologue_2(%cache: tensor<10x16xf32>, %vals: tensor<4x16xf32>, %slots: tensor<4xi32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'lm.cache_write' op expects norm_dim in [1, 16], got 24}}
  %r = lm.cache_write %cache, %vals, %slots norm %w {norm = #lm<norm_kind rms>, norm_dim = 24 : i64, eps = 1.0e-06 : f64} : (tensor<10x16xf32>, tensor<4x16xf32>, tensor<4xi32>, tensor<8xf32>) -> tensor<10x16xf32>
  return
}

// -----

// Tests that lm.cache_write rejects a norm weight of another size than norm_dim.
func.func @cache_write_prologue_3(%cache: tensor<10x16xf32>, %vals: tensor<4x16xf32>, %slots: tensor<4xi32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'lm.cache_write' op expects a norm weight of norm_dim (4) values, got 8}}
  %r = lm.cache_write %cache, %vals, %slots norm %w {norm = #lm<norm_kind rms>, norm_dim = 4 : i64, eps = 1.0e-06 : f64} : (tensor<10x16xf32>, tensor<4x16xf32>, tensor<4xi32>, tensor<8xf32>) -> tensor<10x16xf32>
  return
}

// -----

// Tests that lm.cache_write rejects RoPE without its positions.
func.func @cache_write_prologue_4(%cache: tensor<10x16xf32>, %vals: tensor<4x16xf32>, %slots: tensor<4xi32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'lm.cache_write' op expects rope_style, rope_offset, rope_dim, theta and the positions together or not at all}}
  %r = lm.cache_write %cache, %vals, %slots {rope_style = #lm<rope_style half_split>, rope_offset = 0 : i64, rope_dim = 8 : i64, theta = 1.0e+04 : f64} : (tensor<10x16xf32>, tensor<4x16xf32>, tensor<4xi32>) -> tensor<10x16xf32>
  return
}

// -----

// Tests that lm.cache_write rejects rotated columns outside the row.
func.func @cache_write_prologue_5(%cache: tensor<10x16xf32>, %vals: tensor<4x16xf32>, %slots: tensor<4xi32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'lm.cache_write' op expects the rotated columns [12, 20) inside the row of 16}}
  %r = lm.cache_write %cache, %vals, %slots rope %slots {rope_style = #lm<rope_style half_split>, rope_offset = 12 : i64, rope_dim = 8 : i64, theta = 1.0e+04 : f64} : (tensor<10x16xf32>, tensor<4x16xf32>, tensor<4xi32>, tensor<4xi32>) -> tensor<10x16xf32>
  return
}

// -----

// Tests that lm.cache_write rejects an odd rotary dim.
func.func @cache_write_prologue_6(%cache: tensor<10x16xf32>, %vals: tensor<4x16xf32>, %slots: tensor<4xi32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'lm.cache_write' op expects a positive even rope_dim, got 7}}
  %r = lm.cache_write %cache, %vals, %slots rope %slots {rope_style = #lm<rope_style half_split>, rope_offset = 0 : i64, rope_dim = 7 : i64, theta = 1.0e+04 : f64} : (tensor<10x16xf32>, tensor<4x16xf32>, tensor<4xi32>, tensor<4xi32>) -> tensor<10x16xf32>
  return
}

// -----

// Tests that lm.cache_write rejects yarn without RoPE.
func.func @cache_write_prologue_7(%cache: tensor<10x16xf32>, %vals: tensor<4x16xf32>, %slots: tensor<4xi32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'lm.cache_write' op expects yarn and rope_head_dim only with rope}}
  %r = lm.cache_write %cache, %vals, %slots {yarn = #lm.yarn<factor = 40.0, original_max_positions = 4096, beta_fast = 32.0, beta_slow = 1.0, attention_factor = 1.0, truncate = true>} : (tensor<10x16xf32>, tensor<4x16xf32>, tensor<4xi32>) -> tensor<10x16xf32>
  return
}

// -----

// Tests that lm.cache_write rejects a rope_head_dim that does not divide the row.
func.func @cache_write_rope_heads_0(%cache: tensor<10x16xf32>, %vals: tensor<4x16xf32>, %slots: tensor<4xi32>) {
  // expected-error @+1 {{'lm.cache_write' op expects a rope_head_dim that divides the row of 16, got 6}}
  %r = lm.cache_write %cache, %vals, %slots rope %slots {rope_style = #lm<rope_style half_split>, rope_offset = 0 : i64, rope_dim = 4 : i64, rope_head_dim = 6 : i64, theta = 1.0e+04 : f64} : (tensor<10x16xf32>, tensor<4x16xf32>, tensor<4xi32>, tensor<4xi32>) -> tensor<10x16xf32>
  return
}

// -----

// Tests that lm.cache_write rejects rotated columns outside a head.
func.func @cache_write_rope_heads_1(%cache: tensor<10x16xf32>, %vals: tensor<4x16xf32>, %slots: tensor<4xi32>) {
  // expected-error @+1 {{'lm.cache_write' op expects the rotated columns [4, 12) inside the head of 8}}
  %r = lm.cache_write %cache, %vals, %slots rope %slots {rope_style = #lm<rope_style half_split>, rope_offset = 4 : i64, rope_dim = 8 : i64, rope_head_dim = 8 : i64, theta = 1.0e+04 : f64} : (tensor<10x16xf32>, tensor<4x16xf32>, tensor<4xi32>, tensor<4xi32>) -> tensor<10x16xf32>
  return
}

// -----

// Tests that lm.cache_write rejects a cache of rank < 2.
func.func @cache_write_cache_rank(%cache: tensor<10xbf16>, %vals: tensor<4xbf16>, %slots: tensor<4xi32>) {
  // expected-error @+1 {{'lm.cache_write' op expects cache of rank >= 2, got 'tensor<10xbf16>'}}
  %r = lm.cache_write %cache, %vals, %slots : (tensor<10xbf16>, tensor<4xbf16>, tensor<4xi32>) -> tensor<10xbf16>
  return
}

// -----

// Tests that lm.cache_write rejects values whose rank differs from the cache's.
func.func @cache_write_values_rank(%cache: tensor<10x2x8xbf16>, %vals: tensor<4x16xbf16>, %slots: tensor<4xi32>) {
  // expected-error @+1 {{'lm.cache_write' op expects values of rank 3, got 'tensor<4x16xbf16>'}}
  %r = lm.cache_write %cache, %vals, %slots : (tensor<10x2x8xbf16>, tensor<4x16xbf16>, tensor<4xi32>) -> tensor<10x2x8xbf16>
  return
}

// -----

// Tests that lm.cache_write rejects values whose rows differ from the cache's.
func.func @cache_write_values_row(%cache: tensor<10x2x8xbf16>, %vals: tensor<4x2x4xbf16>, %slots: tensor<4xi32>) {
  // expected-error @+1 {{'lm.cache_write' op expects values dim 2 (4) to equal cache dim 2 (8)}}
  %r = lm.cache_write %cache, %vals, %slots : (tensor<10x2x8xbf16>, tensor<4x2x4xbf16>, tensor<4xi32>) -> tensor<10x2x8xbf16>
  return
}

// -----

// Tests that lm.cache_write rejects slots that are not rank 1.
func.func @cache_write_slots_rank(%cache: tensor<10x2x8xbf16>, %vals: tensor<4x2x8xbf16>, %slots: tensor<4x1xi32>) {
  // expected-error @+1 {{'lm.cache_write' op expects slots of rank 1, got 'tensor<4x1xi32>'}}
  %r = lm.cache_write %cache, %vals, %slots : (tensor<10x2x8xbf16>, tensor<4x2x8xbf16>, tensor<4x1xi32>) -> tensor<10x2x8xbf16>
  return
}

// -----

// Tests that lm.cache_write rejects slots whose size differs from the value count.
func.func @cache_write_slots_dim(%cache: tensor<10x2x8xbf16>, %vals: tensor<4x2x8xbf16>, %slots: tensor<10xi32>) {
  // expected-error @+1 {{'lm.cache_write' op expects slots dim 0 (10) to equal values dim 0 (4)}}
  %r = lm.cache_write %cache, %vals, %slots : (tensor<10x2x8xbf16>, tensor<4x2x8xbf16>, tensor<10xi32>) -> tensor<10x2x8xbf16>
  return
}

// -----

// Tests that lm.cache_write rejects a result type other than the cache's.
func.func @cache_write_result_type(%cache: tensor<10x2x8xbf16>, %vals: tensor<4x2x8xbf16>, %slots: tensor<4xi32>) {
  // expected-error @+1 {{'lm.cache_write' op expects the result type to equal the cache type 'tensor<10x2x8xbf16>', got 'tensor<10x2x8xf32>'}}
  %r = lm.cache_write %cache, %vals, %slots : (tensor<10x2x8xbf16>, tensor<4x2x8xbf16>, tensor<4xi32>) -> tensor<10x2x8xf32>
  return
}

// -----

// Tests that lm.cache_write rejects a result that is merely compatible with the cache type.
func.func @cache_write_result_static(%cache: tensor<?x2x8xbf16>, %vals: tensor<4x2x8xbf16>, %slots: tensor<4xi32>) {
  // expected-error @+1 {{'lm.cache_write' op expects the result type to equal the cache type 'tensor<?x2x8xbf16>', got 'tensor<10x2x8xbf16>'}}
  %r = lm.cache_write %cache, %vals, %slots : (tensor<?x2x8xbf16>, tensor<4x2x8xbf16>, tensor<4xi32>) -> tensor<10x2x8xbf16>
  return
}

// -----

// Tests that lm.cache_write rejects cache rows whose value count overflows 64 bits.
func.func @cache_write_row_overflow(%cache: tensor<10x4000000000x4000000000xbf16>, %vals: tensor<4x4000000000x4000000000xbf16>, %slots: tensor<4xi32>) {
  // expected-error @+1 {{'lm.cache_write' op expects the values per cache row to fit in 64 bits}}
  %r = lm.cache_write %cache, %vals, %slots {layout = #lm.kv_layout<key_value, page_size = 16, feature_dim = 8, storage = bf16, scale_block = 0, tail_dim = 0, tail = bf16>} : (tensor<10x4000000000x4000000000xbf16>, tensor<4x4000000000x4000000000xbf16>, tensor<4xi32>) -> tensor<10x4000000000x4000000000xbf16>
  return
}

// -----

// Tests that lm.cache_write rejects a layout whose feature_dim is not the values per cache row.
func.func @cache_write_layout_feature_dim(%cache: tensor<10x2x8xbf16>, %vals: tensor<4x2x8xbf16>, %slots: tensor<4xi32>) {
  // expected-error @+1 {{'lm.cache_write' op expects the layout's feature_dim (8) to equal the 16 values per cache row}}
  %r = lm.cache_write %cache, %vals, %slots {layout = #lm.kv_layout<key_value, page_size = 16, feature_dim = 8, storage = bf16, scale_block = 0, tail_dim = 0, tail = bf16>} : (tensor<10x2x8xbf16>, tensor<4x2x8xbf16>, tensor<4xi32>) -> tensor<10x2x8xbf16>
  return
}

// -----

// Tests that lm.cache_write rejects i64 slots (ODS: i32).
func.func @cache_write_ods_slots_i64(%cache: tensor<10x2x8xbf16>, %vals: tensor<4x2x8xbf16>, %slots: tensor<4xi64>) {
  // expected-error @+1 {{'lm.cache_write' op operand #2 must be ranked tensor of 32-bit signless integer values, but got 'tensor<4xi64>'}}
  %r = lm.cache_write %cache, %vals, %slots : (tensor<10x2x8xbf16>, tensor<4x2x8xbf16>, tensor<4xi64>) -> tensor<10x2x8xbf16>
  return
}

// -----

// Tests that lm.cache_write rejects a layout that is not an #lm.kv_layout (ODS).
func.func @cache_write_ods_layout_kind(%cache: tensor<10x2x8xbf16>, %vals: tensor<4x2x8xbf16>, %slots: tensor<4xi32>) {
  // expected-error @+1 {{'lm.cache_write' op attribute 'layout' failed to satisfy constraint: storage layout of a per-token cache}}
  %r = lm.cache_write %cache, %vals, %slots {layout = #lm.state_layout<storage = f32, key_major = true>} : (tensor<10x2x8xbf16>, tensor<4x2x8xbf16>, tensor<4xi32>) -> tensor<10x2x8xbf16>
  return
}

// -----

// Tests that #lm.kv_layout rejects page_size = 0.
func.func @kv_layout_page_size(%cache: tensor<10x2x8xbf16>, %vals: tensor<4x2x8xbf16>, %slots: tensor<4xi32>) {
  // expected-error @+1 {{expects page_size > 0, got 0}}
  %r = lm.cache_write %cache, %vals, %slots {layout = #lm.kv_layout<key_value, page_size = 0, feature_dim = 16, storage = bf16, scale_block = 0, tail_dim = 0, tail = bf16>} : (tensor<10x2x8xbf16>, tensor<4x2x8xbf16>, tensor<4xi32>) -> tensor<10x2x8xbf16>
  return
}

// -----

// Tests that #lm.kv_layout rejects feature_dim = 0.
func.func @kv_layout_feature_dim(%cache: tensor<10x2x8xbf16>, %vals: tensor<4x2x8xbf16>, %slots: tensor<4xi32>) {
  // expected-error @+1 {{expects feature_dim > 0, got 0}}
  %r = lm.cache_write %cache, %vals, %slots {layout = #lm.kv_layout<key_value, page_size = 16, feature_dim = 0, storage = bf16, scale_block = 0, tail_dim = 0, tail = bf16>} : (tensor<10x2x8xbf16>, tensor<4x2x8xbf16>, tensor<4xi32>) -> tensor<10x2x8xbf16>
  return
}

// -----

// Tests that #lm.kv_layout rejects a negative tail_dim.
func.func @kv_layout_tail_dim_negative(%cache: tensor<10x2x8xbf16>, %vals: tensor<4x2x8xbf16>, %slots: tensor<4xi32>) {
  // expected-error @+1 {{expects 0 <= tail_dim < feature_dim (16), got -1}}
  %r = lm.cache_write %cache, %vals, %slots {layout = #lm.kv_layout<key_value, page_size = 16, feature_dim = 16, storage = bf16, scale_block = 0, tail_dim = -1, tail = bf16>} : (tensor<10x2x8xbf16>, tensor<4x2x8xbf16>, tensor<4xi32>) -> tensor<10x2x8xbf16>
  return
}

// -----

// Tests that #lm.kv_layout rejects tail_dim = feature_dim.
func.func @kv_layout_tail_dim_all(%cache: tensor<10x2x8xbf16>, %vals: tensor<4x2x8xbf16>, %slots: tensor<4xi32>) {
  // expected-error @+1 {{expects 0 <= tail_dim < feature_dim (16), got 16}}
  %r = lm.cache_write %cache, %vals, %slots {layout = #lm.kv_layout<key_value, page_size = 16, feature_dim = 16, storage = bf16, scale_block = 0, tail_dim = 16, tail = bf16>} : (tensor<10x2x8xbf16>, tensor<4x2x8xbf16>, tensor<4xi32>) -> tensor<10x2x8xbf16>
  return
}

// -----

// Tests that #lm.kv_layout rejects a sub-byte storage type.
func.func @kv_layout_storage_fp4(%cache: tensor<10x2x8xbf16>, %vals: tensor<4x2x8xbf16>, %slots: tensor<4xi32>) {
  // expected-error @+1 {{expects whole-byte storage and tail types, got 'f4E2M1FN' and 'bf16'}}
  %r = lm.cache_write %cache, %vals, %slots {layout = #lm.kv_layout<key_value, page_size = 16, feature_dim = 16, storage = f4E2M1FN, scale_block = 0, tail_dim = 0, tail = bf16>} : (tensor<10x2x8xbf16>, tensor<4x2x8xbf16>, tensor<4xi32>) -> tensor<10x2x8xbf16>
  return
}

// -----

// Tests that #lm.kv_layout rejects a sub-byte tail type.
func.func @kv_layout_tail_i1(%cache: tensor<10x2x8xbf16>, %vals: tensor<4x2x8xbf16>, %slots: tensor<4xi32>) {
  // expected-error @+1 {{expects whole-byte storage and tail types, got 'bf16' and 'i1'}}
  %r = lm.cache_write %cache, %vals, %slots {layout = #lm.kv_layout<key_value, page_size = 16, feature_dim = 16, storage = bf16, scale_block = 0, tail_dim = 0, tail = i1>} : (tensor<10x2x8xbf16>, tensor<4x2x8xbf16>, tensor<4xi32>) -> tensor<10x2x8xbf16>
  return
}

// -----

// Tests that #lm.kv_layout rejects index storage (no fixed width).
func.func @kv_layout_storage_index(%cache: tensor<10x2x8xbf16>, %vals: tensor<4x2x8xbf16>, %slots: tensor<4xi32>) {
  // expected-error @+1 {{expects whole-byte storage and tail types, got 'index' and 'bf16'}}
  %r = lm.cache_write %cache, %vals, %slots {layout = #lm.kv_layout<key_value, page_size = 16, feature_dim = 16, storage = index, scale_block = 0, tail_dim = 0, tail = bf16>} : (tensor<10x2x8xbf16>, tensor<4x2x8xbf16>, tensor<4xi32>) -> tensor<10x2x8xbf16>
  return
}

// -----

// Tests that #lm.kv_layout rejects a non-scalar storage type.
func.func @kv_layout_storage_vector(%cache: tensor<10x2x8xbf16>, %vals: tensor<4x2x8xbf16>, %slots: tensor<4xi32>) {
  // expected-error @+1 {{expects whole-byte storage and tail types, got 'vector<4xf8E4M3FN>' and 'bf16'}}
  %r = lm.cache_write %cache, %vals, %slots {layout = #lm.kv_layout<key_value, page_size = 16, feature_dim = 16, storage = vector<4xf8E4M3FN>, scale_block = 0, tail_dim = 0, tail = bf16>} : (tensor<10x2x8xbf16>, tensor<4x2x8xbf16>, tensor<4xi32>) -> tensor<10x2x8xbf16>
  return
}

// -----

// Tests that #lm.kv_layout rejects a negative scale_block.
func.func @kv_layout_scale_block_negative(%cache: tensor<10x2x8xbf16>, %vals: tensor<4x2x8xbf16>, %slots: tensor<4xi32>) {
  // expected-error @+1 {{expects scale_block to be 0 or to divide the 16 stored values, got -8}}
  %r = lm.cache_write %cache, %vals, %slots {layout = #lm.kv_layout<key_value, page_size = 16, feature_dim = 16, storage = f8E4M3FN, scale_block = -8, tail_dim = 0, tail = bf16>} : (tensor<10x2x8xbf16>, tensor<4x2x8xbf16>, tensor<4xi32>) -> tensor<10x2x8xbf16>
  return
}

// -----

// Tests that #lm.kv_layout rejects a scale_block that does not divide the quantized values.
func.func @kv_layout_scale_block_divide(%cache: tensor<10x576xbf16>, %vals: tensor<4x576xbf16>, %slots: tensor<4xi32>) {
  // expected-error @+1 {{expects scale_block to be 0 or to divide the 576 stored values, got 128}}
  %r = lm.cache_write %cache, %vals, %slots {layout = #lm.kv_layout<mla_latent, page_size = 64, feature_dim = 576, storage = f8E4M3FN, scale_block = 128, tail_dim = 0, tail = bf16>} : (tensor<10x576xbf16>, tensor<4x576xbf16>, tensor<4xi32>) -> tensor<10x576xbf16>
  return
}

// -----

// Tests that #lm.kv_layout rejects an unknown cache kind.
func.func @kv_layout_bad_kind(%cache: tensor<10x2x8xbf16>, %vals: tensor<4x2x8xbf16>, %slots: tensor<4xi32>) {
  // expected-error @+2 {{expected one of [key_value, mla_latent, indexer_key] for what a cache holds per token, got: paged}}
  // expected-error @+1 {{failed to parse Lm_KVLayoutAttr parameter 'kind' which is to be a `CacheKind`}}
  %r = lm.cache_write %cache, %vals, %slots {layout = #lm.kv_layout<paged, page_size = 16, feature_dim = 16, storage = bf16, scale_block = 0, tail_dim = 0, tail = bf16>} : (tensor<10x2x8xbf16>, tensor<4x2x8xbf16>, tensor<4xi32>) -> tensor<10x2x8xbf16>
  return
}

// -----

// Tests that an infinite eps is rejected.
func.func @rms_norm_inf_eps(%x: tensor<4x16xf32>, %w: tensor<16xf32>) {
  // expected-error @+1 {{expects a finite eps, got}}
  %0 = lm.rms_norm %x, %w {eps = 0x7FF0000000000000 : f64} : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return
}

// -----

// Tests that a NaN YaRN factor is rejected.
func.func @yarn_nan(%x: tensor<4x32xf32>, %p: tensor<4xi32>) {
  // expected-error @+1 {{expects a YaRN factor >= 1}}
  %0 = lm.rope %x, %p half_split {offset = 0 : i64, dim = 16 : i64, theta = 10000.0 : f64, yarn = #lm.yarn<factor = 0x7FF8000000000000 : f64, original_max_positions = 64, beta_fast = 32.0 : f64, beta_slow = 1.0 : f64, attention_factor = 1.0 : f64, truncate = true>} : (tensor<4x32xf32>, tensor<4xi32>) -> tensor<4x32xf32>
  return
}

// -----

// Tests that a rotated slice past the end is caught even when offset + dim
// would overflow.
func.func @rope_overflow(%x: tensor<4x48xf32>, %p: tensor<4xi32>) {
  // expected-error @+1 {{expects the rotated slice}}
  %0 = lm.rope %x, %p half_split {offset = 9223372036854775806 : i64, dim = 2 : i64, theta = 10000.0 : f64} : (tensor<4x48xf32>, tensor<4xi32>) -> tensor<4x48xf32>
  return
}

// -----

// Tests that swiglu's alpha and moe_route's scaling factor must be positive.
func.func @swiglu_alpha(%g: tensor<4x8xf32>, %u: tensor<4x8xf32>) {
  // expected-error @+1 {{expects alpha > 0, got}}
  %0 = lm.swiglu %g, %u {alpha = 0x7FF8000000000000 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @route_scale(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{expects scaling_factor > 0, got}}
  %i, %w = lm.moe_route %l softmax {top_k = 2 : i64, scaling_factor = -1.0 : f64} : (tensor<4x8xf32>) -> (tensor<4x2xi32>, tensor<4x2xf32>)
  return
}

// -----

// Tests that a layout on a cache with a dynamic trailing dim is accepted
// (the row width is unknown until run time).
func.func @cache_dynamic_row(%c: tensor<?x?x64xbf16>, %v: tensor<?x?x64xbf16>, %s: tensor<?xi32>) {
  %0 = lm.cache_write %c, %v, %s {layout = #lm.kv_layout<key_value, page_size = 16, feature_dim = 128, storage = bf16, scale_block = 0, tail_dim = 0, tail = bf16>} : (tensor<?x?x64xbf16>, tensor<?x?x64xbf16>, tensor<?xi32>) -> tensor<?x?x64xbf16>
  return
}

// -----

// Tests that sizes fixed by one operand are checked even when another
// operand's dim is dynamic: value_dim against the kv width.
func.func @sparse_dynamic_q(%q: tensor<4x8x?xf32>, %kv: tensor<10x96xf32>, %i: tensor<4x2xi32>) {
  // expected-error @+1 {{expects 0 < value_dim <= the query/key dim (96), got 128}}
  %0 = lm.sparse_attention %q, %kv, %i {scale = 0.1 : f64, value_dim = 128 : i64} : (tensor<4x8x?xf32>, tensor<10x96xf32>, tensor<4x2xi32>) -> tensor<4x8x128xf32>
  return
}

// -----

// Tests that the MXFP4 block rule uses the input's K when the weight's is
// dynamic.
func.func @mxfp4_dynamic_k(%x: tensor<4x48xf32>, %w: tensor<8x128x?xf4E2M1FN>, %s: tensor<8x128x7xf8E8M0FNU>, %i: tensor<4x2xi32>) {
  // expected-error @+1 {{expects the reduction dim K to be a multiple of the MXFP4 block of 32, got 48}}
  %0 = lm.mxfp4_expert_matmul %x, %w, %s, %i : (tensor<4x48xf32>, tensor<8x128x?xf4E2M1FN>, tensor<8x128x7xf8E8M0FNU>, tensor<4x2xi32>) -> tensor<4x2x128xf32>
  return
}

// -----

// Tests that expert groups are checked against the bias's expert count when
// the logits' is dynamic.
func.func @route_dynamic_experts(%l: tensor<?x?xf32>, %b: tensor<10xf32>) {
  // expected-error @+1 {{expects 10 experts to split into 4 equal groups}}
  %i, %w = lm.moe_route %l bias %b sigmoid {top_k = 2 : i64, num_groups = 4 : i64, top_k_groups = 2 : i64} : (tensor<?x?xf32>, tensor<10xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  return
}

// -----

// Tests that GQA head sharing uses v's head count when k's is dynamic.
func.func @attention_dynamic_kv_heads(%q: tensor<4x6x64xf32>, %k: tensor<6x?x64xf32>, %v: tensor<6x4x32xf32>) {
  // expected-error @+1 {{expects the query heads (6) to be a multiple of the key/value heads (4)}}
  %0 = lm.attention %q, %k, %v causal {scale = 0.125 : f64} : (tensor<4x6x64xf32>, tensor<6x?x64xf32>, tensor<6x4x32xf32>) -> tensor<4x6x32xf32>
  return
}

// -----

// Tests that the FP8 scale grid is checked against the input and result
// sizes when the weight's are dynamic.
func.func @fp8_dynamic_weight(%x: tensor<4x300xbf16>, %w: tensor<?x?xf8E4M3FN>, %s: tensor<2x9xf32>) {
  // expected-error @+1 {{expects scale_inv dim 1 to be 3 (weight dim divided by the block size, rounded up), got 9}}
  %0 = lm.fp8_matmul %x, %w, %s {block_size = array<i64: 128, 128>} : (tensor<4x300xbf16>, tensor<?x?xf8E4M3FN>, tensor<2x9xf32>) -> tensor<4x200xbf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// lm.head_matmul
//===----------------------------------------------------------------------===//

// Tests that lm.head_matmul rejects an input that is not rank 3 [T, H, K].
func.func @head_matmul_input_rank(%x: tensor<4x16xf32>, %w: tensor<2x8x16xbf16>) {
  // expected-error @+1 {{'lm.head_matmul' op expects input of rank 3, got 'tensor<4x16xf32>'}}
  %r = lm.head_matmul %x, %w : (tensor<4x16xf32>, tensor<2x8x16xbf16>) -> tensor<4x2x16xf32>
  return
}

// -----

// Tests that lm.head_matmul rejects a weight that is not rank 3.
func.func @head_matmul_weight_rank(%x: tensor<4x2x8xf32>, %w: tensor<8x16xbf16>) {
  // expected-error @+1 {{'lm.head_matmul' op expects weight of rank 3, got 'tensor<8x16xbf16>'}}
  %r = lm.head_matmul %x, %w : (tensor<4x2x8xf32>, tensor<8x16xbf16>) -> tensor<4x2x16xf32>
  return
}

// -----

// Tests that lm.head_matmul rejects a weight whose head count differs from the input's.
func.func @head_matmul_weight_heads(%x: tensor<4x2x8xf32>, %w: tensor<3x8x16xbf16>) {
  // expected-error @+1 {{'lm.head_matmul' op expects weight dim 0 (3) to equal input dim 1 (2)}}
  %r = lm.head_matmul %x, %w : (tensor<4x2x8xf32>, tensor<3x8x16xbf16>) -> tensor<4x2x16xf32>
  return
}

// -----

// Tests that lm.head_matmul rejects a [H, K, N] weight whose K differs from the input's.
func.func @head_matmul_weight_k(%x: tensor<4x2x8xf32>, %w: tensor<2x6x16xbf16>) {
  // expected-error @+1 {{'lm.head_matmul' op expects weight dim 1 (6) to equal input dim 2 (8)}}
  %r = lm.head_matmul %x, %w : (tensor<4x2x8xf32>, tensor<2x6x16xbf16>) -> tensor<4x2x16xf32>
  return
}

// -----

// Tests that lm.head_matmul with transpose_weight reads K from the weight's last
// dim: a [H, K, N] weight that fits the plain layout is rejected.
func.func @head_matmul_transposed_weight_k(%x: tensor<4x2x8xf32>, %w: tensor<2x8x16xbf16>) {
  // expected-error @+1 {{'lm.head_matmul' op expects weight dim 2 (16) to equal input dim 2 (8)}}
  %r = lm.head_matmul %x, %w {transpose_weight} : (tensor<4x2x8xf32>, tensor<2x8x16xbf16>) -> tensor<4x2x8xf32>
  return
}

// -----

// Tests that lm.head_matmul rejects a result that is not rank 3.
func.func @head_matmul_result_rank(%x: tensor<4x2x8xf32>, %w: tensor<2x8x16xbf16>) {
  // expected-error @+1 {{'lm.head_matmul' op expects result of rank 3, got 'tensor<4x32xf32>'}}
  %r = lm.head_matmul %x, %w : (tensor<4x2x8xf32>, tensor<2x8x16xbf16>) -> tensor<4x32xf32>
  return
}

// -----

// Tests that lm.head_matmul rejects a result whose token count differs from the input's.
func.func @head_matmul_result_tokens(%x: tensor<4x2x8xf32>, %w: tensor<2x8x16xbf16>) {
  // expected-error @+1 {{'lm.head_matmul' op expects result dim 0 (5) to equal input dim 0 (4)}}
  %r = lm.head_matmul %x, %w : (tensor<4x2x8xf32>, tensor<2x8x16xbf16>) -> tensor<5x2x16xf32>
  return
}

// -----

// Tests that lm.head_matmul rejects a result whose head count differs from the input's.
func.func @head_matmul_result_heads(%x: tensor<4x2x8xf32>, %w: tensor<2x8x16xbf16>) {
  // expected-error @+1 {{'lm.head_matmul' op expects result dim 1 (3) to equal input dim 1 (2)}}
  %r = lm.head_matmul %x, %w : (tensor<4x2x8xf32>, tensor<2x8x16xbf16>) -> tensor<4x3x16xf32>
  return
}

// -----

// Tests that lm.head_matmul rejects a result whose last dim is not the weight's N (dim 2).
func.func @head_matmul_result_n(%x: tensor<4x2x8xf32>, %w: tensor<2x8x16xbf16>) {
  // expected-error @+1 {{'lm.head_matmul' op expects result dim 2 (8) to equal weight dim 2 (16)}}
  %r = lm.head_matmul %x, %w : (tensor<4x2x8xf32>, tensor<2x8x16xbf16>) -> tensor<4x2x8xf32>
  return
}

// -----

// Tests that lm.head_matmul with transpose_weight takes N from the weight's dim 1.
func.func @head_matmul_transposed_result_n(%x: tensor<4x2x8xf32>, %w: tensor<2x16x8xbf16>) {
  // expected-error @+1 {{'lm.head_matmul' op expects result dim 2 (8) to equal weight dim 1 (16)}}
  %r = lm.head_matmul %x, %w {transpose_weight} : (tensor<4x2x8xf32>, tensor<2x16x8xbf16>) -> tensor<4x2x8xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// lm.fp8_dequant
//===----------------------------------------------------------------------===//

// Tests that lm.fp8_dequant rejects a weight of rank 1.
func.func @fp8_dequant_weight_rank(%w: tensor<64xf8E4M3FN>, %s: tensor<1xf32>) {
  // expected-error @+1 {{'lm.fp8_dequant' op expects a weight of rank 2 [N, K] or 3 [E, N, K], got 'tensor<64xf8E4M3FN>'}}
  %r = lm.fp8_dequant %w, %s {block_size = array<i64: 128, 128>} : (tensor<64xf8E4M3FN>, tensor<1xf32>) -> tensor<64xf32>
  return
}

// -----

// Tests that lm.fp8_dequant rejects a weight of rank 4.
func.func @fp8_dequant_weight_rank4(%w: tensor<2x4x256x64xf8E4M3FN>, %s: tensor<2x4x2x1xf32>) {
  // expected-error @+1 {{'lm.fp8_dequant' op expects a weight of rank 2 [N, K] or 3 [E, N, K], got 'tensor<2x4x256x64xf8E4M3FN>'}}
  %r = lm.fp8_dequant %w, %s {block_size = array<i64: 128, 128>} : (tensor<2x4x256x64xf8E4M3FN>, tensor<2x4x2x1xf32>) -> tensor<2x4x256x64xf32>
  return
}

// -----

// Tests that lm.fp8_dequant rejects a weight that is not e4m3.
func.func @fp8_dequant_weight_type(%w: tensor<256x64xbf16>, %s: tensor<2x1xf32>) {
  // expected-error @+1 {{'lm.fp8_dequant' op operand #0 must be ranked tensor of f8E4M3FN type values}}
  %r = lm.fp8_dequant %w, %s {block_size = array<i64: 128, 128>} : (tensor<256x64xbf16>, tensor<2x1xf32>) -> tensor<256x64xf32>
  return
}

// -----

// Tests that lm.fp8_dequant rejects a block_size of one size.
func.func @fp8_dequant_block_size_count(%w: tensor<256x64xf8E4M3FN>, %s: tensor<2x1xf32>) {
  // expected-error @+1 {{'lm.fp8_dequant' op expects block_size of two positive sizes [bn, bk]}}
  %r = lm.fp8_dequant %w, %s {block_size = array<i64: 128>} : (tensor<256x64xf8E4M3FN>, tensor<2x1xf32>) -> tensor<256x64xf32>
  return
}

// -----

// Tests that lm.fp8_dequant rejects a block_size of zero.
func.func @fp8_dequant_block_size_zero(%w: tensor<256x64xf8E4M3FN>, %s: tensor<2x1xf32>) {
  // expected-error @+1 {{'lm.fp8_dequant' op expects block_size of two positive sizes [bn, bk]}}
  %r = lm.fp8_dequant %w, %s {block_size = array<i64: 128, 0>} : (tensor<256x64xf8E4M3FN>, tensor<2x1xf32>) -> tensor<256x64xf32>
  return
}

// -----

// Tests that lm.fp8_dequant rejects a scale_inv whose rank differs from the weight's.
func.func @fp8_dequant_scale_rank(%w: tensor<4x256x64xf8E4M3FN>, %s: tensor<2x1xf32>) {
  // expected-error @+1 {{'lm.fp8_dequant' op expects scale_inv of rank 3, got 'tensor<2x1xf32>'}}
  %r = lm.fp8_dequant %w, %s {block_size = array<i64: 128, 128>} : (tensor<4x256x64xf8E4M3FN>, tensor<2x1xf32>) -> tensor<4x256x64xf32>
  return
}

// -----

// Tests that lm.fp8_dequant rejects stacked scales whose expert count differs from the weight's.
func.func @fp8_dequant_scale_experts(%w: tensor<4x256x64xf8E4M3FN>, %s: tensor<3x2x1xf32>) {
  // expected-error @+1 {{'lm.fp8_dequant' op expects scale_inv dim 0 (3) to equal weight dim 0 (4)}}
  %r = lm.fp8_dequant %w, %s {block_size = array<i64: 128, 128>} : (tensor<4x256x64xf8E4M3FN>, tensor<3x2x1xf32>) -> tensor<4x256x64xf32>
  return
}

// -----

// Tests that lm.fp8_dequant rejects a scale_inv with the wrong number of row blocks.
func.func @fp8_dequant_scale_rows(%w: tensor<256x64xf8E4M3FN>, %s: tensor<3x1xf32>) {
  // expected-error @+1 {{'lm.fp8_dequant' op expects scale_inv dim 0 to be 2 (weight dim divided by the block size, rounded up), got 3}}
  %r = lm.fp8_dequant %w, %s {block_size = array<i64: 128, 128>} : (tensor<256x64xf8E4M3FN>, tensor<3x1xf32>) -> tensor<256x64xf32>
  return
}

// -----

// Tests that lm.fp8_dequant counts a partial edge block along K (200 / 128 rounds up to 2).
func.func @fp8_dequant_scale_cols(%w: tensor<256x200xf8E4M3FN>, %s: tensor<2x1xf32>) {
  // expected-error @+1 {{'lm.fp8_dequant' op expects scale_inv dim 1 to be 2 (weight dim divided by the block size, rounded up), got 1}}
  %r = lm.fp8_dequant %w, %s {block_size = array<i64: 128, 128>} : (tensor<256x200xf8E4M3FN>, tensor<2x1xf32>) -> tensor<256x200xf32>
  return
}

// -----

// Tests that lm.fp8_dequant checks the scale grid of a stacked weight past the expert dim.
func.func @fp8_dequant_stacked_scale_rows(%w: tensor<4x300x64xf8E4M3FN>, %s: tensor<4x2x1xf32>) {
  // expected-error @+1 {{'lm.fp8_dequant' op expects scale_inv dim 1 to be 3 (weight dim divided by the block size, rounded up), got 2}}
  %r = lm.fp8_dequant %w, %s {block_size = array<i64: 128, 128>} : (tensor<4x300x64xf8E4M3FN>, tensor<4x2x1xf32>) -> tensor<4x300x64xf32>
  return
}

// -----

// Tests that lm.fp8_dequant rejects a result whose rank differs from the weight's.
func.func @fp8_dequant_result_rank(%w: tensor<256x64xf8E4M3FN>, %s: tensor<2x1xf32>) {
  // expected-error @+1 {{'lm.fp8_dequant' op expects result and weight of the same shape, got 'tensor<16384xf32>' and 'tensor<256x64xf8E4M3FN>'}}
  %r = lm.fp8_dequant %w, %s {block_size = array<i64: 128, 128>} : (tensor<256x64xf8E4M3FN>, tensor<2x1xf32>) -> tensor<16384xf32>
  return
}

// -----

// Tests that lm.fp8_dequant rejects a result whose dims differ from the weight's.
func.func @fp8_dequant_result_dim(%w: tensor<256x64xf8E4M3FN>, %s: tensor<2x1xf32>) {
  // expected-error @+1 {{'lm.fp8_dequant' op expects result dim 1 (32) to equal weight dim 1 (64)}}
  %r = lm.fp8_dequant %w, %s {block_size = array<i64: 128, 128>} : (tensor<256x64xf8E4M3FN>, tensor<2x1xf32>) -> tensor<256x32xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// lm.expert_matmul
//===----------------------------------------------------------------------===//

// Tests that lm.expert_matmul rejects a weight that is not rank 3 [E, N, K].
func.func @expert_matmul_weight_rank(%x: tensor<4x256xf32>, %w: tensor<64x256xbf16>, %i: tensor<4x2xi32>) {
  // expected-error @+1 {{'lm.expert_matmul' op expects weight of rank 3, got 'tensor<64x256xbf16>'}}
  %r = lm.expert_matmul %x, %w, %i : (tensor<4x256xf32>, tensor<64x256xbf16>, tensor<4x2xi32>) -> tensor<4x2x64xf32>
  return
}

// -----

// Tests that lm.expert_matmul rejects indices that are not rank 2.
func.func @expert_matmul_indices_rank(%x: tensor<4x256xf32>, %w: tensor<8x64x256xbf16>, %i: tensor<4xi32>) {
  // expected-error @+1 {{'lm.expert_matmul' op expects indices of rank 2, got 'tensor<4xi32>'}}
  %r = lm.expert_matmul %x, %w, %i : (tensor<4x256xf32>, tensor<8x64x256xbf16>, tensor<4xi32>) -> tensor<4x2x64xf32>
  return
}

// -----

// Tests that lm.expert_matmul rejects an input of rank 1.
func.func @expert_matmul_input_rank(%x: tensor<256xf32>, %w: tensor<8x64x256xbf16>, %i: tensor<4x2xi32>) {
  // expected-error @+1 {{'lm.expert_matmul' op expects input of rank 2 [T, K] or 3 [T, k, K], got 'tensor<256xf32>'}}
  %r = lm.expert_matmul %x, %w, %i : (tensor<256xf32>, tensor<8x64x256xbf16>, tensor<4x2xi32>) -> tensor<4x2x64xf32>
  return
}

// -----

// Tests that lm.expert_matmul rejects an input whose token count differs from the indices'.
func.func @expert_matmul_input_tokens(%x: tensor<5x256xf32>, %w: tensor<8x64x256xbf16>, %i: tensor<4x2xi32>) {
  // expected-error @+1 {{'lm.expert_matmul' op expects input dim 0 (5) to equal indices dim 0 (4)}}
  %r = lm.expert_matmul %x, %w, %i : (tensor<5x256xf32>, tensor<8x64x256xbf16>, tensor<4x2xi32>) -> tensor<4x2x64xf32>
  return
}

// -----

// Tests that lm.expert_matmul rejects a per-slot input whose slot count differs from the indices'.
func.func @expert_matmul_input_slots(%x: tensor<4x3x64xf32>, %w: tensor<8x256x64xbf16>, %i: tensor<4x2xi32>) {
  // expected-error @+1 {{'lm.expert_matmul' op expects input dim 1 (3) to equal indices dim 1 (2)}}
  %r = lm.expert_matmul %x, %w, %i : (tensor<4x3x64xf32>, tensor<8x256x64xbf16>, tensor<4x2xi32>) -> tensor<4x2x256xf32>
  return
}

// -----

// Tests that lm.expert_matmul rejects an input whose K differs from the weight's.
func.func @expert_matmul_input_k(%x: tensor<4x128xf32>, %w: tensor<8x64x256xbf16>, %i: tensor<4x2xi32>) {
  // expected-error @+1 {{'lm.expert_matmul' op expects input dim -1 (128) to equal weight dim 2 (256)}}
  %r = lm.expert_matmul %x, %w, %i : (tensor<4x128xf32>, tensor<8x64x256xbf16>, tensor<4x2xi32>) -> tensor<4x2x64xf32>
  return
}

// -----

// Tests that lm.expert_matmul rejects a bias that is not rank 2 [E, N].
func.func @expert_matmul_bias_rank(%x: tensor<4x256xf32>, %w: tensor<8x64x256xbf16>, %i: tensor<4x2xi32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{'lm.expert_matmul' op expects bias of rank 2, got 'tensor<64xf32>'}}
  %r = lm.expert_matmul %x, %w, %i bias %b : (tensor<4x256xf32>, tensor<8x64x256xbf16>, tensor<4x2xi32>, tensor<64xf32>) -> tensor<4x2x64xf32>
  return
}

// -----

// Tests that lm.expert_matmul rejects a bias whose expert count differs from the weight's.
func.func @expert_matmul_bias_experts(%x: tensor<4x256xf32>, %w: tensor<8x64x256xbf16>, %i: tensor<4x2xi32>, %b: tensor<7x64xf32>) {
  // expected-error @+1 {{'lm.expert_matmul' op expects bias dim 0 (7) to equal weight dim 0 (8)}}
  %r = lm.expert_matmul %x, %w, %i bias %b : (tensor<4x256xf32>, tensor<8x64x256xbf16>, tensor<4x2xi32>, tensor<7x64xf32>) -> tensor<4x2x64xf32>
  return
}

// -----

// Tests that lm.expert_matmul rejects a bias whose N differs from the weight's.
func.func @expert_matmul_bias_n(%x: tensor<4x256xf32>, %w: tensor<8x64x256xbf16>, %i: tensor<4x2xi32>, %b: tensor<8x32xf32>) {
  // expected-error @+1 {{'lm.expert_matmul' op expects bias dim 1 (32) to equal weight dim 1 (64)}}
  %r = lm.expert_matmul %x, %w, %i bias %b : (tensor<4x256xf32>, tensor<8x64x256xbf16>, tensor<4x2xi32>, tensor<8x32xf32>) -> tensor<4x2x64xf32>
  return
}

// -----

// Tests that lm.expert_matmul rejects routing weights whose shape differs from the indices'.
func.func @expert_matmul_routing_shape(%x: tensor<4x2x64xf32>, %w: tensor<8x256x64xbf16>, %i: tensor<4x2xi32>, %rw: tensor<4x3xf32>) {
  // expected-error @+1 {{'lm.expert_matmul' op expects weights dim 1 (3) to equal indices dim 1 (2)}}
  %r = lm.expert_matmul %x, %w, %i weights %rw : (tensor<4x2x64xf32>, tensor<8x256x64xbf16>, tensor<4x2xi32>, tensor<4x3xf32>) -> tensor<4x256xf32>
  return
}

// -----

// Tests that lm.expert_matmul with routing weights rejects a per-slot (rank 3) result.
func.func @expert_matmul_weighted_result_rank(%x: tensor<4x2x64xf32>, %w: tensor<8x256x64xbf16>, %i: tensor<4x2xi32>, %rw: tensor<4x2xf32>) {
  // expected-error @+1 {{'lm.expert_matmul' op expects result of rank 2, got 'tensor<4x2x256xf32>'}}
  %r = lm.expert_matmul %x, %w, %i weights %rw : (tensor<4x2x64xf32>, tensor<8x256x64xbf16>, tensor<4x2xi32>, tensor<4x2xf32>) -> tensor<4x2x256xf32>
  return
}

// -----

// Tests that lm.expert_matmul without routing weights rejects a summed (rank 2) result.
func.func @expert_matmul_result_rank(%x: tensor<4x256xf32>, %w: tensor<8x64x256xbf16>, %i: tensor<4x2xi32>) {
  // expected-error @+1 {{'lm.expert_matmul' op expects result of rank 3, got 'tensor<4x64xf32>'}}
  %r = lm.expert_matmul %x, %w, %i : (tensor<4x256xf32>, tensor<8x64x256xbf16>, tensor<4x2xi32>) -> tensor<4x64xf32>
  return
}

// -----

// Tests that lm.expert_matmul rejects a per-slot result whose slot count differs from the indices'.
func.func @expert_matmul_result_slots(%x: tensor<4x256xf32>, %w: tensor<8x64x256xbf16>, %i: tensor<4x2xi32>) {
  // expected-error @+1 {{'lm.expert_matmul' op expects result dim 1 (3) to equal indices dim 1 (2)}}
  %r = lm.expert_matmul %x, %w, %i : (tensor<4x256xf32>, tensor<8x64x256xbf16>, tensor<4x2xi32>) -> tensor<4x3x64xf32>
  return
}

// -----

// Tests that lm.expert_matmul rejects a result whose token count differs from the indices'.
func.func @expert_matmul_result_tokens(%x: tensor<4x256xf32>, %w: tensor<8x64x256xbf16>, %i: tensor<4x2xi32>) {
  // expected-error @+1 {{'lm.expert_matmul' op expects result dim 0 (5) to equal indices dim 0 (4)}}
  %r = lm.expert_matmul %x, %w, %i : (tensor<4x256xf32>, tensor<8x64x256xbf16>, tensor<4x2xi32>) -> tensor<5x2x64xf32>
  return
}

// -----

// Tests that lm.expert_matmul rejects a result whose N differs from the weight's.
func.func @expert_matmul_result_n(%x: tensor<4x256xf32>, %w: tensor<8x64x256xbf16>, %i: tensor<4x2xi32>) {
  // expected-error @+1 {{'lm.expert_matmul' op expects result dim -1 (32) to equal weight dim 1 (64)}}
  %r = lm.expert_matmul %x, %w, %i : (tensor<4x256xf32>, tensor<8x64x256xbf16>, tensor<4x2xi32>) -> tensor<4x2x32xf32>
  return
}

// -----

// Tests that lm.expert_matmul rejects a weighted result whose N differs from the weight's.
func.func @expert_matmul_weighted_result_n(%x: tensor<4x2x64xf32>, %w: tensor<8x256x64xbf16>, %i: tensor<4x2xi32>, %rw: tensor<4x2xf32>) {
  // expected-error @+1 {{'lm.expert_matmul' op expects result dim -1 (128) to equal weight dim 1 (256)}}
  %r = lm.expert_matmul %x, %w, %i weights %rw : (tensor<4x2x64xf32>, tensor<8x256x64xbf16>, tensor<4x2xi32>, tensor<4x2xf32>) -> tensor<4x128xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// lm.weight and lm.weight_ref
//===----------------------------------------------------------------------===//

// Tests that lm.weight rejects both sources and a value.
// expected-error @+1 {{'lm.weight' op expects either sources or a value, not both}}
lm.weight @both : tensor<2xf32> {sources = ["model.w"], value = dense<1.0> : tensor<2xf32>}

// -----

// Tests that lm.weight rejects a value whose type is not the weight's.
// expected-error @+1 {{'lm.weight' op expects a value of the weight's type 'tensor<2xf32>', got 'tensor<3xf32>'}}
lm.weight @value_type : tensor<2xf32> {sources = [], value = dense<1.0> : tensor<3xf32>}

// -----

// Tests that lm.weight rejects a value whose element type is not the weight's.
// expected-error @+1 {{'lm.weight' op expects a value of the weight's type 'tensor<2xbf16>', got 'tensor<2xf32>'}}
lm.weight @value_elem : tensor<2xbf16> {sources = [], value = dense<1.0> : tensor<2xf32>}

// -----

// Tests that lm.weight rejects neither sources nor a value.
// expected-error @+1 {{'lm.weight' op expects at least one source tensor name}}
lm.weight @nothing : tensor<2xf32> {sources = []}

// -----

// Tests that lm.weight rejects a dynamic shape.
// expected-error @+1 {{'lm.weight' op expects a static weight shape, got 'tensor<?x64xbf16>'}}
lm.weight @dynamic : tensor<?x64xbf16> {sources = ["model.w"]}

// -----

// Tests that lm.weight rejects stacked sources that cannot each hold a row.
// expected-error @+1 {{'lm.weight' op expects whole rows for each of its 3 stacked sources, got 'tensor<1x2x64xbf16>'}}
lm.weight @stacked : tensor<1x2x64xbf16> {sources = ["e.0", "e.1", "e.2"]}

// -----

// Tests that lm.weight rejects stacked sources on a rank-0 weight.
// expected-error @+1 {{'lm.weight' op expects whole rows for each of its 2 stacked sources, got 'tensor<bf16>'}}
lm.weight @stacked_scalar : tensor<bf16> {sources = ["e.0", "e.1"]}

// -----

// Tests that lm.weight rejects a shard of a folded value.
// expected-error @+1 {{'lm.weight' op expects a shard only of checkpoint sources}}
lm.weight @shard_value : tensor<2xf32> {sources = [], value = dense<1.0> : tensor<2xf32>, shard = #lm.shard<dim = 0, offset = 0, size = 2>}

// -----

// Tests that lm.weight rejects a shard of a dim the weight does not have.
// expected-error @+1 {{'lm.weight' op expects a shard dim below the weight's rank 2, got 2}}
lm.weight @shard_dim : tensor<64x32xbf16> {sources = ["model.w"], shard = #lm.shard<dim = 2, offset = 0, size = 32>}

// -----

// Tests that #lm.shard rejects an empty range.
// expected-error @+1 {{expects a dim and offset >= 0 and a size >= 1, got dim = 0, offset = 4, size = 0}}
lm.weight @shard_empty : tensor<64x32xbf16> {sources = ["model.w"], shard = #lm.shard<dim = 0, offset = 4, size = 0>}

// -----

// Tests that lm.weight_ref rejects a symbol that does not exist.
func.func @weight_ref_missing() {
  // expected-error @+1 {{'lm.weight_ref' op expects 'missing' to name an lm.weight}}
  %w = lm.weight_ref @missing : tensor<2x4xbf16>
  return
}

// -----

// Tests that lm.weight_ref rejects a symbol that is not an lm.weight.
func.func private @not_a_weight()
func.func @weight_ref_not_weight() {
  // expected-error @+1 {{'lm.weight_ref' op expects 'not_a_weight' to name an lm.weight}}
  %w = lm.weight_ref @not_a_weight : tensor<2x4xbf16>
  return
}

// -----

// Tests that lm.weight_ref rejects a result type other than the weight's.
lm.weight @w : tensor<2x4xbf16> {sources = ["model.w"]}
func.func @weight_ref_type() {
  // expected-error @+1 {{'lm.weight_ref' op expects the type of 'w', 'tensor<2x4xbf16>', got 'tensor<2x4xf32>'}}
  %w = lm.weight_ref @w : tensor<2x4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// lm.elementwise and lm.yield
//===----------------------------------------------------------------------===//

// Tests that lm.elementwise rejects a body with fewer arguments than inputs.
func.func @elementwise_arg_count(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) {
  // expected-error @+1 {{'lm.elementwise' op expects one body argument per input, got 1 for 2}}
  %r = lm.elementwise (%a, %b) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%x: f32):
    lm.yield %x : f32
  }
  return
}

// -----

// Tests that lm.elementwise rejects an input whose rank differs from the result's.
func.func @elementwise_input_rank(%a: tensor<32xf32>, %b: tensor<4x8xf32>) {
  // expected-error @+1 {{'lm.elementwise' op expects input 0 and result of the same shape, got 'tensor<32xf32>' and 'tensor<4x8xf32>'}}
  %r = lm.elementwise (%a, %b) : (tensor<32xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%x: f32, %y: f32):
    %s = arith.addf %x, %y : f32
    lm.yield %s : f32
  }
  return
}

// -----

// Tests that lm.elementwise rejects an input whose dims differ from the result's.
func.func @elementwise_input_dim(%a: tensor<4x8xf32>, %b: tensor<4x16xf32>) {
  // expected-error @+1 {{'lm.elementwise' op expects input 1 dim 1 (16) to equal result dim 1 (8)}}
  %r = lm.elementwise (%a, %b) : (tensor<4x8xf32>, tensor<4x16xf32>) -> tensor<4x8xf32> {
  ^bb0(%x: f32, %y: f32):
    %s = arith.addf %x, %y : f32
    lm.yield %s : f32
  }
  return
}

// -----

// Tests that lm.elementwise rejects a body argument whose type is not its input's element type.
func.func @elementwise_arg_type(%a: tensor<4x8xf32>, %b: tensor<4x8xbf16>) {
  // expected-error @+1 {{'lm.elementwise' op expects body argument 1 of type 'bf16', got 'f32'}}
  %r = lm.elementwise (%a, %b) : (tensor<4x8xf32>, tensor<4x8xbf16>) -> tensor<4x8xf32> {
  ^bb0(%x: f32, %y: f32):
    %s = arith.addf %x, %y : f32
    lm.yield %s : f32
  }
  return
}

// -----

// Tests that lm.elementwise rejects a body that does not end in lm.yield.
func.func @elementwise_no_yield(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) {
  // expected-error @+1 {{'lm.elementwise' op expects the body to end in lm.yield}}
  %r = lm.elementwise (%a, %b) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%x: f32, %y: f32):
    %s = arith.addf %x, %y : f32
  }
  return
}

// -----

// Tests that lm.elementwise rejects an lm.yield that is not the last op of the body.
func.func @elementwise_yield_not_last(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{'lm.elementwise' op expects the body to end in lm.yield}}
  %r = lm.elementwise (%a) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%x: f32):
    lm.yield %x : f32
    %n = arith.negf %x : f32
  }
  return
}

// -----

// Tests that lm.elementwise rejects a yielded value whose type is not the result's element type.
func.func @elementwise_yield_type(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{'lm.elementwise' op expects the body to yield 'bf16', got 'f32'}}
  %r = lm.elementwise (%a) : (tensor<4x8xf32>) -> tensor<4x8xbf16> {
  ^bb0(%x: f32):
    %n = arith.negf %x : f32
    lm.yield %n : f32
  }
  return
}

// -----

// Tests that lm.yield is rejected outside lm.elementwise.
func.func @yield_parent(%x: f32) {
  // expected-error @+1 {{'lm.yield' op expects parent op 'lm.elementwise'}}
  lm.yield %x : f32
}

// -----

//===----------------------------------------------------------------------===//
// The sequences operand of the batched cache readers and writers
//===----------------------------------------------------------------------===//

// Tests that lm.cache_write rejects sequences that are not rank 1.
func.func @cache_write_sequences_rank(%c: tensor<2x64x80xf32>, %v: tensor<4x80xf32>, %s: tensor<4xi32>, %seq: tensor<4x1xi32>) {
  // expected-error @+1 {{'lm.cache_write' op expects sequences of rank 1, got 'tensor<4x1xi32>'}}
  %r = lm.cache_write %c, %v, %s sequences %seq : (tensor<2x64x80xf32>, tensor<4x80xf32>, tensor<4xi32>, tensor<4x1xi32>) -> tensor<2x64x80xf32>
  return
}

// -----

// Tests that lm.cache_write rejects sequences whose length differs from the values' token count.
func.func @cache_write_sequences_length(%c: tensor<2x64x80xf32>, %v: tensor<4x80xf32>, %s: tensor<4xi32>, %seq: tensor<5xi32>) {
  // expected-error @+1 {{'lm.cache_write' op expects sequences dim 0 (5) to equal values dim 0 (4)}}
  %r = lm.cache_write %c, %v, %s sequences %seq : (tensor<2x64x80xf32>, tensor<4x80xf32>, tensor<4xi32>, tensor<5xi32>) -> tensor<2x64x80xf32>
  return
}

// -----

// Tests that lm.cache_write rejects sequences that are not i32.
func.func @cache_write_sequences_type(%c: tensor<2x64x80xf32>, %v: tensor<4x80xf32>, %s: tensor<4xi32>, %seq: tensor<4xi64>) {
  // expected-error @+1 {{'lm.cache_write' op operand #3 must be ranked tensor of 32-bit signless integer values, but got 'tensor<4xi64>'}}
  %r = lm.cache_write %c, %v, %s sequences %seq : (tensor<2x64x80xf32>, tensor<4x80xf32>, tensor<4xi32>, tensor<4xi64>) -> tensor<2x64x80xf32>
  return
}

// -----

// Tests that lm.cache_write with sequences rejects a cache without a batch dim.
func.func @cache_write_sequences_cache_rank(%c: tensor<64x80xf32>, %v: tensor<4x80xf32>, %s: tensor<4xi32>, %seq: tensor<4xi32>) {
  // expected-error @+1 {{'lm.cache_write' op expects cache of rank >= 3, got 'tensor<64x80xf32>'}}
  %r = lm.cache_write %c, %v, %s sequences %seq : (tensor<64x80xf32>, tensor<4x80xf32>, tensor<4xi32>, tensor<4xi32>) -> tensor<64x80xf32>
  return
}

// -----

// Tests that lm.cache_write with sequences rejects values carrying the batch dim.
func.func @cache_write_sequences_values_rank(%c: tensor<2x64x80xf32>, %v: tensor<4x1x80xf32>, %s: tensor<4xi32>, %seq: tensor<4xi32>) {
  // expected-error @+1 {{'lm.cache_write' op expects values of rank 2, got 'tensor<4x1x80xf32>'}}
  %r = lm.cache_write %c, %v, %s sequences %seq : (tensor<2x64x80xf32>, tensor<4x1x80xf32>, tensor<4xi32>, tensor<4xi32>) -> tensor<2x64x80xf32>
  return
}

// -----

// Tests that lm.cache_write with sequences compares the values' row with the
// cache dims after [B, S] (here a row of S = 64 values is rejected).
func.func @cache_write_sequences_values_row(%c: tensor<2x64x80xf32>, %v: tensor<4x64xf32>, %s: tensor<4xi32>, %seq: tensor<4xi32>) {
  // expected-error @+1 {{'lm.cache_write' op expects values dim 1 (64) to equal cache dim 2 (80)}}
  %r = lm.cache_write %c, %v, %s sequences %seq : (tensor<2x64x80xf32>, tensor<4x64xf32>, tensor<4xi32>, tensor<4xi32>) -> tensor<2x64x80xf32>
  return
}

// -----

// Tests that lm.cache_write with sequences counts a layout's feature_dim over
// the dims after [B, S]: the 80-wide rows of a [2, 64, 80] cache.
func.func @cache_write_sequences_layout(%c: tensor<2x64x80xbf16>, %v: tensor<4x80xbf16>, %s: tensor<4xi32>, %seq: tensor<4xi32>) {
  // expected-error @+1 {{'lm.cache_write' op expects the layout's feature_dim (64) to equal the 80 values per cache row}}
  %r = lm.cache_write %c, %v, %s sequences %seq {layout = #lm.kv_layout<key_value, page_size = 16, feature_dim = 64, storage = bf16, scale_block = 0, tail_dim = 0, tail = bf16>} : (tensor<2x64x80xbf16>, tensor<4x80xbf16>, tensor<4xi32>, tensor<4xi32>) -> tensor<2x64x80xbf16>
  return
}

// -----

// Tests that lm.cache_write with sequences accepts a layout whose feature_dim
// is the row width after [B, S].
func.func @cache_write_sequences_layout_ok(%c: tensor<2x64x80xbf16>, %v: tensor<4x80xbf16>, %s: tensor<4xi32>, %seq: tensor<4xi32>) {
  %r = lm.cache_write %c, %v, %s sequences %seq {layout = #lm.kv_layout<key_value, page_size = 16, feature_dim = 80, storage = bf16, scale_block = 0, tail_dim = 0, tail = bf16>} : (tensor<2x64x80xbf16>, tensor<4x80xbf16>, tensor<4xi32>, tensor<4xi32>) -> tensor<2x64x80xbf16>
  return
}

// -----

// Tests that lm.dsa_indexer_scores rejects sequences that are not rank 1.
func.func @dsa_scores_sequences_rank(%q: tensor<4x4x32xf32>, %k: tensor<2x64x32xf32>, %w: tensor<4x4xf32>, %seq: tensor<4x1xi32>) {
  // expected-error @+1 {{'lm.dsa_indexer_scores' op expects sequences of rank 1, got 'tensor<4x1xi32>'}}
  %r = lm.dsa_indexer_scores %q, %k, %w sequences %seq {scale = 0.0884 : f64} : (tensor<4x4x32xf32>, tensor<2x64x32xf32>, tensor<4x4xf32>, tensor<4x1xi32>) -> tensor<4x64xf32>
  return
}

// -----

// Tests that lm.dsa_indexer_scores rejects sequences whose length differs from the query count.
func.func @dsa_scores_sequences_length(%q: tensor<4x4x32xf32>, %k: tensor<2x64x32xf32>, %w: tensor<4x4xf32>, %seq: tensor<3xi32>) {
  // expected-error @+1 {{'lm.dsa_indexer_scores' op expects sequences dim 0 (3) to equal q dim 0 (4)}}
  %r = lm.dsa_indexer_scores %q, %k, %w sequences %seq {scale = 0.0884 : f64} : (tensor<4x4x32xf32>, tensor<2x64x32xf32>, tensor<4x4xf32>, tensor<3xi32>) -> tensor<4x64xf32>
  return
}

// -----

// Tests that lm.dsa_indexer_scores with sequences rejects a key cache without a batch dim.
func.func @dsa_scores_sequences_k_rank(%q: tensor<4x4x32xf32>, %k: tensor<64x32xf32>, %w: tensor<4x4xf32>, %seq: tensor<4xi32>) {
  // expected-error @+1 {{'lm.dsa_indexer_scores' op expects k of rank 3, got 'tensor<64x32xf32>'}}
  %r = lm.dsa_indexer_scores %q, %k, %w sequences %seq {scale = 0.0884 : f64} : (tensor<4x4x32xf32>, tensor<64x32xf32>, tensor<4x4xf32>, tensor<4xi32>) -> tensor<4x64xf32>
  return
}

// -----

// Tests that lm.dsa_indexer_scores with sequences rejects a key dim that differs from the query's.
func.func @dsa_scores_sequences_k_dim(%q: tensor<4x4x32xf32>, %k: tensor<2x64x16xf32>, %w: tensor<4x4xf32>, %seq: tensor<4xi32>) {
  // expected-error @+1 {{'lm.dsa_indexer_scores' op expects k dim -1 (16) to equal q dim 2 (32)}}
  %r = lm.dsa_indexer_scores %q, %k, %w sequences %seq {scale = 0.0884 : f64} : (tensor<4x4x32xf32>, tensor<2x64x16xf32>, tensor<4x4xf32>, tensor<4xi32>) -> tensor<4x64xf32>
  return
}

// -----

// Tests that lm.dsa_indexer_scores with sequences takes the key count from
// k's dim 1 (S), not the batch dim.
func.func @dsa_scores_sequences_result(%q: tensor<4x4x32xf32>, %k: tensor<2x64x32xf32>, %w: tensor<4x4xf32>, %seq: tensor<4xi32>) {
  // expected-error @+1 {{'lm.dsa_indexer_scores' op expects result dim 1 (2) to equal k dim 1 (64)}}
  %r = lm.dsa_indexer_scores %q, %k, %w sequences %seq {scale = 0.0884 : f64} : (tensor<4x4x32xf32>, tensor<2x64x32xf32>, tensor<4x4xf32>, tensor<4xi32>) -> tensor<4x2xf32>
  return
}

// -----

// Tests that lm.sparse_attention rejects sequences that are not rank 1.
func.func @sparse_attention_sequences_rank(%q: tensor<4x4x80xf32>, %kv: tensor<2x64x80xf32>, %i: tensor<4x16xi32>, %seq: tensor<4x1xi32>) {
  // expected-error @+1 {{'lm.sparse_attention' op expects sequences of rank 1, got 'tensor<4x1xi32>'}}
  %r = lm.sparse_attention %q, %kv, %i sequences %seq {scale = 0.27 : f64, value_dim = 64 : i64} : (tensor<4x4x80xf32>, tensor<2x64x80xf32>, tensor<4x16xi32>, tensor<4x1xi32>) -> tensor<4x4x64xf32>
  return
}

// -----

// Tests that lm.sparse_attention rejects sequences whose length differs from the query count.
func.func @sparse_attention_sequences_length(%q: tensor<4x4x80xf32>, %kv: tensor<2x64x80xf32>, %i: tensor<4x16xi32>, %seq: tensor<5xi32>) {
  // expected-error @+1 {{'lm.sparse_attention' op expects sequences dim 0 (5) to equal q dim 0 (4)}}
  %r = lm.sparse_attention %q, %kv, %i sequences %seq {scale = 0.27 : f64, value_dim = 64 : i64} : (tensor<4x4x80xf32>, tensor<2x64x80xf32>, tensor<4x16xi32>, tensor<5xi32>) -> tensor<4x4x64xf32>
  return
}

// -----

// Tests that lm.sparse_attention with sequences rejects a kv cache without a batch dim.
func.func @sparse_attention_sequences_kv_rank(%q: tensor<4x4x80xf32>, %kv: tensor<64x80xf32>, %i: tensor<4x16xi32>, %seq: tensor<4xi32>) {
  // expected-error @+1 {{'lm.sparse_attention' op expects kv of rank 3, got 'tensor<64x80xf32>'}}
  %r = lm.sparse_attention %q, %kv, %i sequences %seq {scale = 0.27 : f64, value_dim = 64 : i64} : (tensor<4x4x80xf32>, tensor<64x80xf32>, tensor<4x16xi32>, tensor<4xi32>) -> tensor<4x4x64xf32>
  return
}

// -----

// Tests that lm.sparse_attention with sequences rejects a kv width that differs from the query's.
func.func @sparse_attention_sequences_kv_dim(%q: tensor<4x4x80xf32>, %kv: tensor<2x64x96xf32>, %i: tensor<4x16xi32>, %seq: tensor<4xi32>) {
  // expected-error @+1 {{'lm.sparse_attention' op expects kv dim -1 (96) to equal q dim 2 (80)}}
  %r = lm.sparse_attention %q, %kv, %i sequences %seq {scale = 0.27 : f64, value_dim = 64 : i64} : (tensor<4x4x80xf32>, tensor<2x64x96xf32>, tensor<4x16xi32>, tensor<4xi32>) -> tensor<4x4x64xf32>
  return
}

// -----

// Tests that lm.mxfp4_to_fp8_experts rejects a workspace of more slots than
// experts.
func.func @mxfp4_to_fp8_slots(%w: tensor<8x128x64xf4E2M1FN>, %s: tensor<8x128x2xf8E8M0FNU>, %idx: tensor<4x2xi32>) {
  // expected-error @+1 {{'lm.mxfp4_to_fp8_experts' op expects a static workspace of 1 to E = 8 expert slots, got 9}}
  %c:4 = lm.mxfp4_to_fp8_experts %w, %s, %idx : (tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>, tensor<4x2xi32>) -> (tensor<9x128x64xf8E4M3FN>, tensor<9x128x2xf32>, tensor<9x128xf32>, tensor<4x2xi32>)
  return
}

// -----

// Tests that lm.mxfp4_to_fp8_experts rejects workspace codes of another row
// length than the weight's K.
func.func @mxfp4_to_fp8_codes(%w: tensor<8x128x64xf4E2M1FN>, %s: tensor<8x128x2xf8E8M0FNU>, %idx: tensor<4x2xi32>) {
  // expected-error @+1 {{'lm.mxfp4_to_fp8_experts' op expects codes dim 2 (32) to equal weight dim 2 (64)}}
  %c:4 = lm.mxfp4_to_fp8_experts %w, %s, %idx : (tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>, tensor<4x2xi32>) -> (tensor<4x128x32xf8E4M3FN>, tensor<4x128x2xf32>, tensor<4x128xf32>, tensor<4x2xi32>)
  return
}

// -----

// Tests that lm.mxfp4_to_fp8_experts rejects remapped indices of another
// shape than the indices.
func.func @mxfp4_to_fp8_remapped(%w: tensor<8x128x64xf4E2M1FN>, %s: tensor<8x128x2xf8E8M0FNU>, %idx: tensor<4x2xi32>) {
  // expected-error @+1 {{'lm.mxfp4_to_fp8_experts' op expects slots dim 1 (3) to equal indices dim 1 (2)}}
  %c:4 = lm.mxfp4_to_fp8_experts %w, %s, %idx : (tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>, tensor<4x2xi32>) -> (tensor<4x128x64xf8E4M3FN>, tensor<4x128x2xf32>, tensor<4x128xf32>, tensor<4x3xi32>)
  return
}

// -----

// Tests that lm.dsa_kpool rejects a tail state whose rows are not the pool
// size - 1.
func.func @dsa_kpool_tail_rows(%k: tensor<?x32xf32>, %g: tensor<?x32xf32>, %ape: tensor<4x32xbf16>, %tail: tensor<2x4x64xf32>, %pos: tensor<?xi32>, %seq: tensor<?xi32>) {
  // expected-error @+1 {{'lm.dsa_kpool' op expects state dim 1 to be 3 (max(pool size - 1, 1)), got 4}}
  %o, %t = lm.dsa_kpool %k, %g, %ape, %tail, %pos, %seq : (tensor<?x32xf32>, tensor<?x32xf32>, tensor<4x32xbf16>, tensor<2x4x64xf32>, tensor<?xi32>, tensor<?xi32>) -> (tensor<?x32xf32>, tensor<2x4x64xf32>)
  return
}

// -----

// Tests that lm.dsa_kpool rejects a tail state whose rows do not hold a key
// and a gate.
func.func @dsa_kpool_tail_width(%k: tensor<?x32xf32>, %g: tensor<?x32xf32>, %ape: tensor<4x32xbf16>, %tail: tensor<2x3x32xf32>, %pos: tensor<?xi32>, %seq: tensor<?xi32>) {
  // expected-error @+1 {{'lm.dsa_kpool' op expects state dim 2 to be 64 (2 x key width), got 32}}
  %o, %t = lm.dsa_kpool %k, %g, %ape, %tail, %pos, %seq : (tensor<?x32xf32>, tensor<?x32xf32>, tensor<4x32xbf16>, tensor<2x3x32xf32>, tensor<?xi32>, tensor<?xi32>) -> (tensor<?x32xf32>, tensor<2x3x32xf32>)
  return
}

// -----

// Tests that lm.dsa_kpool rejects an ape of another key width.
func.func @dsa_kpool_ape_width(%k: tensor<?x32xf32>, %g: tensor<?x32xf32>, %ape: tensor<4x16xbf16>, %tail: tensor<2x3x64xf32>, %pos: tensor<?xi32>, %seq: tensor<?xi32>) {
  // expected-error @+1 {{'lm.dsa_kpool' op expects ape dim 1 (16) to equal keys dim 1 (32)}}
  %o, %t = lm.dsa_kpool %k, %g, %ape, %tail, %pos, %seq : (tensor<?x32xf32>, tensor<?x32xf32>, tensor<4x16xbf16>, tensor<2x3x64xf32>, tensor<?xi32>, tensor<?xi32>) -> (tensor<?x32xf32>, tensor<2x3x64xf32>)
  return
}

// -----

// Tests that lm.dsa_kpool_expand rejects a result that does not hold the
// selected pools' tokens plus a tail.
func.func @dsa_kpool_expand_width(%pools: tensor<?x4xi32>, %pos: tensor<?xi32>) {
  // expected-error @+1 {{'lm.dsa_kpool_expand' op expects result dim 1 to be 19 (pools dim 1 x pool_size + pool_size - 1), got 16}}
  %r = lm.dsa_kpool_expand %pools, %pos {pool_size = 4 : i64} : (tensor<?x4xi32>, tensor<?xi32>) -> tensor<?x16xi32>
  return
}

// -----

// Tests that lm.dsa_kpool_expand rejects a pool size of 0.
func.func @dsa_kpool_expand_pool(%pools: tensor<?x4xi32>, %pos: tensor<?xi32>) {
  // expected-error @+1 {{'lm.dsa_kpool_expand' op expects pool_size > 0, got 0}}
  %r = lm.dsa_kpool_expand %pools, %pos {pool_size = 0 : i64} : (tensor<?x4xi32>, tensor<?xi32>) -> tensor<?x3xi32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// lm.transpose
//===----------------------------------------------------------------------===//

// Tests that lm.transpose rejects a permutation of the wrong length.
func.func @transpose_rank(%w: tensor<2x3xbf16>) {
  // expected-error @+1 {{'lm.transpose' op expects a permutation of 2 dimensions, got 3}}
  %t = lm.transpose %w {permutation = array<i64: 0, 1, 2>} : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
  return
}

// -----

// Tests that lm.transpose rejects a repeated dimension.
func.func @transpose_repeat(%w: tensor<2x3xbf16>) {
  // expected-error @+1 {{'lm.transpose' op expects a permutation of [0, 2), got [1, 1]}}
  %t = lm.transpose %w {permutation = array<i64: 1, 1>} : (tensor<2x3xbf16>) -> tensor<3x3xbf16>
  return
}

// -----

// Tests that lm.transpose rejects a result shape that is not the permuted input's.
func.func @transpose_shape(%w: tensor<2x3xbf16>) {
  // expected-error @+1 {{'lm.transpose' op expects result type 'tensor<3x2xbf16>', got 'tensor<2x3xbf16>'}}
  %t = lm.transpose %w {permutation = array<i64: 1, 0>} : (tensor<2x3xbf16>) -> tensor<2x3xbf16>
  return
}

// -----

// Tests that lm.transpose keeps the element type.
func.func @transpose_type(%w: tensor<2x3xbf16>) {
  // expected-error @+1 {{'lm.transpose' op expects the input's element type 'bf16', got 'f32'}}
  %t = lm.transpose %w {permutation = array<i64: 1, 0>} : (tensor<2x3xbf16>) -> tensor<3x2xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// lm.all_reduce and lm.all_gather
//===----------------------------------------------------------------------===//

// Tests that lm.all_reduce rejects a group of no ranks.
func.func @all_reduce_ranks(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'lm.all_reduce' op expects ranks >= 1, got 0}}
  %y = lm.all_reduce %x over 0 ranks : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests that lm.all_gather rejects a result whose last dim is not ranks x
// the input's.
func.func @all_gather_width(%x: tensor<?x8xf32>) -> tensor<?x24xf32> {
  // expected-error @+1 {{'lm.all_gather' op expects a static last dim of 2 x the input's, got 'tensor<?x8xf32>' -> 'tensor<?x24xf32>'}}
  %y = lm.all_gather %x over 2 ranks : tensor<?x8xf32> -> tensor<?x24xf32>
  return %y : tensor<?x24xf32>
}

// -----

// Tests that lm.all_gather rejects a leading dim that changes.
func.func @all_gather_rows(%x: tensor<4x8xf32>) -> tensor<2x16xf32> {
  // expected-error @+1 {{'lm.all_gather' op expects dim 0 of the result to equal the input's, got 'tensor<4x8xf32>' -> 'tensor<2x16xf32>'}}
  %y = lm.all_gather %x over 2 ranks : tensor<4x8xf32> -> tensor<2x16xf32>
  return %y : tensor<2x16xf32>
}

// -----

// Tests that lm.local_experts rejects an empty range of experts.
func.func @local_experts_count(%ids: tensor<4x2xi32>) -> tensor<4x2xi32> {
  // expected-error @+1 {{'lm.local_experts' op expects first >= 0 and count >= 1, got first 4, count 0}}
  %y = lm.local_experts %ids from 4 count 0 : tensor<4x2xi32>
  return %y : tensor<4x2xi32>
}

// -----

// Tests that lm.all_gather rejects another element type.
func.func @all_gather_type(%x: tensor<4x8xf32>) -> tensor<4x16xbf16> {
  // expected-error @+1 {{'lm.all_gather' op expects a result of the input's rank (>= 1) and element type, got 'tensor<4x8xf32>' -> 'tensor<4x16xbf16>'}}
  %y = lm.all_gather %x over 2 ranks : tensor<4x8xf32> -> tensor<4x16xbf16>
  return %y : tensor<4x16xbf16>
}

// -----

// Tests that lm.dsa_indexer_scores rejects a query RoPE without its positions.
func.func @indexer_rope_0(%q: tensor<2x4x16xf32>, %k: tensor<8x16xf32>, %w: tensor<2x4xf32>) {
  // expected-error @+1 {{'lm.dsa_indexer_scores' op expects rope_style, rope_offset, rope_dim, theta and the positions together or not at all}}
  %s = lm.dsa_indexer_scores %q, %k, %w {scale = 1.0 : f64, rope_style = #lm<rope_style half_split>, rope_offset = 0 : i64, rope_dim = 8 : i64, theta = 1.0e+04 : f64} : (tensor<2x4x16xf32>, tensor<8x16xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that lm.dsa_indexer_scores rejects rotated columns outside a head.
func.func @indexer_rope_1(%q: tensor<2x4x16xf32>, %k: tensor<8x16xf32>, %w: tensor<2x4xf32>, %pos: tensor<2xi32>) {
  // expected-error @+1 {{'lm.dsa_indexer_scores' op expects the rotated columns [12, 20) inside the head of 16}}
  %s = lm.dsa_indexer_scores %q, %k, %w rope %pos {scale = 1.0 : f64, rope_style = #lm<rope_style half_split>, rope_offset = 12 : i64, rope_dim = 8 : i64, theta = 1.0e+04 : f64} : (tensor<2x4x16xf32>, tensor<8x16xf32>, tensor<2x4xf32>, tensor<2xi32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that lm.dsa_indexer_scores rejects positions of another token count.
func.func @indexer_rope_2(%q: tensor<2x4x16xf32>, %k: tensor<8x16xf32>, %w: tensor<2x4xf32>, %pos: tensor<3xi32>) {
  // expected-error @+1 {{'lm.dsa_indexer_scores' op expects positions dim 0 (3) to equal q dim 0 (2)}}
  %s = lm.dsa_indexer_scores %q, %k, %w rope %pos {scale = 1.0 : f64, rope_style = #lm<rope_style interleaved>, rope_offset = 0 : i64, rope_dim = 8 : i64, theta = 1.0e+04 : f64} : (tensor<2x4x16xf32>, tensor<8x16xf32>, tensor<2x4xf32>, tensor<3xi32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that lm.dsa_indexer_scores rejects yarn without RoPE.
func.func @indexer_rope_3(%q: tensor<2x4x16xf32>, %k: tensor<8x16xf32>, %w: tensor<2x4xf32>) {
  // expected-error @+1 {{'lm.dsa_indexer_scores' op expects yarn only with rope}}
  %s = lm.dsa_indexer_scores %q, %k, %w {scale = 1.0 : f64, yarn = #lm.yarn<factor = 40.0, original_max_positions = 4096, beta_fast = 32.0, beta_slow = 1.0, attention_factor = 1.0, truncate = true>} : (tensor<2x4x16xf32>, tensor<8x16xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that lm.mxfp4_to_fp8_experts with all_from_tokens needs a slot for
// every expert.
func.func @mxfp4_to_fp8_all_slots(%w: tensor<8x128x64xf4E2M1FN>, %s: tensor<8x128x2xf8E8M0FNU>, %idx: tensor<4x2xi32>) {
  // expected-error @+1 {{'lm.mxfp4_to_fp8_experts' op with all_from_tokens expects a workspace of every expert (E = 8 slots), got 4}}
  %c:4 = lm.mxfp4_to_fp8_experts %w, %s, %idx {all_from_tokens = 9 : i64} : (tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>, tensor<4x2xi32>) -> (tensor<4x128x64xf8E4M3FN>, tensor<4x128x2xf32>, tensor<4x128xf32>, tensor<4x2xi32>)
  return
}

// -----

// Tests that lm.mxfp4_to_fp8_experts rejects a non-positive all_from_tokens.
func.func @mxfp4_to_fp8_all_from_zero(%w: tensor<8x128x64xf4E2M1FN>, %s: tensor<8x128x2xf8E8M0FNU>, %idx: tensor<4x2xi32>) {
  // expected-error @+1 {{'lm.mxfp4_to_fp8_experts' op expects all_from_tokens to be positive, got 0}}
  %c:4 = lm.mxfp4_to_fp8_experts %w, %s, %idx {all_from_tokens = 0 : i64} : (tensor<8x128x64xf4E2M1FN>, tensor<8x128x2xf8E8M0FNU>, tensor<4x2xi32>) -> (tensor<8x128x64xf8E4M3FN>, tensor<8x128x2xf32>, tensor<8x128xf32>, tensor<4x2xi32>)
  return
}
