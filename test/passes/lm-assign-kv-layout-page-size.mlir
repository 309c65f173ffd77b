// RUN: not daybreak-opt %s --lm-assign-kv-layout="page-size=0" 2>&1 | FileCheck %s
// Known bug: AssignKVLayout.cpp streams the `pageSize` pass option straight
// into the diagnostic, which prints it as a char ("got \0", "got \xFF" for

// Tests that a non-positive page size is reported on the module with its
// value.
// CHECK: error: page-size must be positive, got 0{{$}}
module {
}
