// RUN: daybreak-opt %s -split-input-file -verify-diagnostics --plan-assign-workspace

// Tests that a step without max_sizes cannot be planned.
// expected-error @+1 {{needs max_sizes to size its buffers}}
plan.step @no_max arena(4096) sizes ["tokens"] {
^bb0(%t: index):
  %a = plan.buffer "a" offset(0) : memref<64xf32>
}
