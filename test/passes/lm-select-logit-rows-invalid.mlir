// RUN: daybreak-opt %s -split-input-file -verify-diagnostics --lm-select-logit-rows=max-rows=4
// RUN: not daybreak-opt %s -split-input-file --lm-select-logit-rows 2>&1 | FileCheck %s --check-prefix=ROWS

// ROWS: error: lm-select-logit-rows: max-rows must be positive, got 0

// Tests that a prefill function without a result of role `logits` is
// rejected, naming it.
// expected-error @+1 {{lm-select-logit-rows: @prefill has no result of role 'logits'}}
func.func @prefill(%ids: tensor<?xi32> {lm.role = "token_ids"}) -> tensor<?xi32> {
  return %ids : tensor<?xi32>
}

// -----

// Tests that a function that already selects its rows is not given a
// second input.
// expected-error @+1 {{lm-select-logit-rows: @prefill already selects its logit rows}}
func.func @prefill(%x: tensor<?x8xf32> {lm.role = "token_ids"},
                   %rows: tensor<4xi32> {lm.role = "logit_rows"})
    -> (tensor<4x8xf32> {lm.role = "logits"}) {
  %g = lm.gather_rows %x, %rows : (tensor<?x8xf32>, tensor<4xi32>) -> tensor<4x8xf32>
  return %g : tensor<4x8xf32>
}

// -----

// Tests that logits of another rank are rejected.
// expected-error @+1 {{lm-select-logit-rows: @prefill's logits are not [tokens, vocab]: 'tensor<?x2x8xf32>'}}
func.func @prefill(%x: tensor<?x2x8xf32> {lm.role = "token_ids"})
    -> (tensor<?x2x8xf32> {lm.role = "logits"}) {
  return %x : tensor<?x2x8xf32>
}

// -----

// Tests the op's verifier: the result has one row per index and the input's
// width.
func.func @gather(%x: tensor<?x8xf32>, %rows: tensor<4xi32>) -> tensor<3x8xf32> {
  // expected-error @+1 {{'lm.gather_rows' op}}
  %g = lm.gather_rows %x, %rows : (tensor<?x8xf32>, tensor<4xi32>) -> tensor<3x8xf32>
  return %g : tensor<3x8xf32>
}

// -----

// Tests that logits computed from other than f32 activations are rejected
// (lm.gather_rows takes f32).
// expected-error @+1 {{lm-select-logit-rows: @prefill's logits come from 'tensor<?x8xbf16>', not f32 activations lm.gather_rows can take}}
func.func @prefill(%x: tensor<?x8xbf16> {lm.role = "token_ids"})
    -> (tensor<?x8xbf16> {lm.role = "logits"}) {
  return %x : tensor<?x8xbf16>
}
