// RUN: daybreak-opt %s -split-input-file -verify-diagnostics

// Tests that a weight must have a static shape.
// expected-error @+1 {{expects a static weight shape, got 'tensor<?x256xbf16>'}}
plan.weight @w : tensor<?x256xbf16> {section = 0 : i64, offset = 0 : i64}

// -----

// Tests that a weight section index must not be negative.
// expected-error @+1 {{expects section >= 0, got -1}}
plan.weight @w : tensor<256xbf16> {section = -1 : i64, offset = 0 : i64}

// -----

// Tests that a weight offset must be aligned to 64 bytes.
// expected-error @+1 {{expects a non-negative offset aligned to 64 bytes, got 96}}
plan.weight @w : tensor<256xbf16> {section = 0 : i64, offset = 96 : i64}

// -----

// Tests that a cache pool must hold at least one layer.
// expected-error @+1 {{expects layers > 0, got 0}}
plan.cache_pool @pool {layers = 0 : i64, max_tokens = 1024 : i64,
    layout = #lm.kv_layout<indexer_key, page_size = 64, feature_dim = 128,
                           storage = f8E4M3FN, scale_block = 128,
                           tail_dim = 0, tail = bf16>}

// -----

// Tests that a cache pool's token count must be whole pages.
// expected-error @+1 {{expects max_tokens to be a positive multiple of the page size 64, got 1000}}
plan.cache_pool @pool {layers = 2 : i64, max_tokens = 1000 : i64,
    layout = #lm.kv_layout<indexer_key, page_size = 64, feature_dim = 128,
                           storage = f8E4M3FN, scale_block = 128,
                           tail_dim = 0, tail = bf16>}

// -----

// Tests that a kernel must name its entry symbol.
// expected-error @+1 {{expects a non-empty entry symbol}}
plan.kernel @k {target = #plan<target cuda>, entry = "", num_args = 1 : i64}

// -----

// Tests that a kernel's argument count must not be negative.
// expected-error @+1 {{expects num_args >= 0, got -1}}
plan.kernel @k {target = #plan<target cpu>, entry = "k", num_args = -1 : i64}

// -----

// Tests that a step's arena size must not be negative.
// expected-error @+1 {{expects arena_size >= 0, got -256}}
plan.step @decode arena(-256) sizes ["tokens"] {
^bb0(%tokens: index):
}

// -----

// Tests that a step names each of its size arguments, no more and no fewer.
// expected-error @+1 {{expects one name per size argument: 1 arguments, 2 names}}
plan.step @decode arena(0) sizes ["tokens", "batch"] {
^bb0(%tokens: index):
}

// -----

// Tests that a step's size arguments must be of type index.
// expected-error @+1 {{expects index size arguments, got 'i64'}}
plan.step @decode arena(0) sizes ["tokens"] {
^bb0(%tokens: i64):
}

// -----

// Tests that a buffer gives one size per dynamic dim of its type.
plan.step @decode arena(1048576) sizes ["tokens"] {
^bb0(%tokens: index):
  // expected-error @+1 {{expects one size per dynamic dim of 'memref<?x?xbf16>', got 1}}
  %h = plan.buffer "hidden" offset(0) (%tokens) : memref<?x?xbf16>
}

// -----

// Tests that a buffer offset must be aligned to 256 bytes.
plan.step @decode arena(1048576) sizes ["tokens"] {
^bb0(%tokens: index):
  // expected-error @+1 {{expects a non-negative offset aligned to 256 bytes, got 128}}
  %h = plan.buffer "hidden" offset(128) (%tokens) : memref<?x256xbf16>
}

// -----

// Tests that a buffer lives only inside a step, which owns the arena.
// expected-error @+1 {{expects to be inside a plan.step}}
%h = plan.buffer "hidden" offset(0) : memref<256xbf16>

// -----

// Tests that a statically shaped buffer must end inside the arena.
plan.step @decode arena(1024) sizes [] {
  %ok = plan.buffer "fits" offset(512) : memref<256xbf16>
  // expected-error @+1 {{expects the buffer of 512 bytes at offset 768 inside the arena of 1024 bytes}}
  %bad = plan.buffer "spills" offset(768) : memref<256xbf16>
}

// -----

// Tests that a weight view must name a declared weight.
plan.kernel @norm {target = #plan<target cpu>, entry = "norm", num_args = 1 : i64}
plan.step @decode arena(0) sizes [] {
  // expected-error @+1 {{expects 'norm' to name a plan.weight}}
  %w = plan.weight_ref @norm : memref<256xbf16>
}

// -----

// Tests that a weight view has the weight's shape and stored element type.
plan.weight @norm : tensor<256xbf16> {section = 0 : i64, offset = 0 : i64}
plan.step @decode arena(0) sizes [] {
  // expected-error @+1 {{expects the view type to match the weight 'tensor<256xbf16>', got 'memref<256xf32>'}}
  %w = plan.weight_ref @norm : memref<256xf32>
}

// -----

// Tests that a cache view must name a declared cache pool.
plan.weight @idx_keys : tensor<256xbf16> {section = 0 : i64, offset = 0 : i64}
plan.step @decode arena(0) sizes [] {
  // expected-error @+1 {{expects 'idx_keys' to name a plan.cache_pool}}
  %c = plan.cache_ref @idx_keys layer(0) : memref<1024x132xi8>
}

// -----

// Tests that a cache view's layer must be one of the pool's layers.
plan.cache_pool @idx_keys {layers = 2 : i64, max_tokens = 1024 : i64,
    layout = #lm.kv_layout<indexer_key, page_size = 64, feature_dim = 128,
                           storage = f8E4M3FN, scale_block = 128,
                           tail_dim = 0, tail = bf16>}
plan.step @decode arena(0) sizes [] {
  // expected-error @+1 {{expects a layer in [0, 2), got 2}}
  %c = plan.cache_ref @idx_keys layer(2) : memref<1024x132xi8>
}

// -----

// Tests that a cache view covers max_tokens rows of bytes_per_token bytes
// (128 FP8 values + one f32 scale = 132 bytes here).
plan.cache_pool @idx_keys {layers = 2 : i64, max_tokens = 1024 : i64,
    layout = #lm.kv_layout<indexer_key, page_size = 64, feature_dim = 128,
                           storage = f8E4M3FN, scale_block = 128,
                           tail_dim = 0, tail = bf16>}
plan.step @decode arena(0) sizes [] {
  // expected-error @+1 {{expects memref<1024x132xi8> for the pool's layer, got 'memref<1024x128xi8>'}}
  %c = plan.cache_ref @idx_keys layer(0) : memref<1024x128xi8>
}

// -----

// Tests that a launch grid has no dims and exactly three extents.
plan.kernel @k {target = #plan<target cuda>, entry = "k", num_args = 1 : i64}
plan.step @decode arena(1048576) sizes ["tokens"] {
^bb0(%tokens: index):
  %h = plan.buffer "hidden" offset(0) (%tokens) : memref<?x256xbf16>
  // expected-error @+1 {{expects a grid map with no dims and three results, got affine_map<()[s0] -> (s0, 1)>}}
  plan.launch @k [%tokens] grid affine_map<()[s0] -> (s0, 1)> block [256, 1, 1]
      smem 0 (%h) : memref<?x256xbf16>
}

// -----

// Tests that a launch grid has one symbol per size operand.
plan.kernel @k {target = #plan<target cuda>, entry = "k", num_args = 1 : i64}
plan.step @decode arena(1048576) sizes ["tokens", "batch"] {
^bb0(%tokens: index, %batch: index):
  %h = plan.buffer "hidden" offset(0) (%tokens) : memref<?x256xbf16>
  // expected-error @+1 {{expects one grid symbol per size operand: 1 symbols, 2 sizes}}
  plan.launch @k [%tokens, %batch] grid affine_map<()[s0] -> (s0, 1, 1)>
      block [256, 1, 1] smem 0 (%h) : memref<?x256xbf16>
}

// -----

// Tests that a launch block has three positive extents.
plan.kernel @k {target = #plan<target cuda>, entry = "k", num_args = 1 : i64}
plan.step @decode arena(1048576) sizes ["tokens"] {
^bb0(%tokens: index):
  %h = plan.buffer "hidden" offset(0) (%tokens) : memref<?x256xbf16>
  // expected-error @+1 {{expects a block of three extents in [1, 1024]}}
  plan.launch @k [%tokens] grid affine_map<()[s0] -> (s0, 1, 1)> block [256, 0, 1]
      smem 0 (%h) : memref<?x256xbf16>
}

// -----

// Tests that a launch block has at most 1024 threads.
plan.kernel @k {target = #plan<target cuda>, entry = "k", num_args = 1 : i64}
plan.step @decode arena(1048576) sizes ["tokens"] {
^bb0(%tokens: index):
  %h = plan.buffer "hidden" offset(0) (%tokens) : memref<?x256xbf16>
  // expected-error @+1 {{expects at most 1024 threads per block, got 2048}}
  plan.launch @k [%tokens] grid affine_map<()[s0] -> (s0, 1, 1)> block [256, 8, 1]
      smem 0 (%h) : memref<?x256xbf16>
}

// -----

// Tests that a launch's dynamic shared memory must not be negative.
plan.kernel @k {target = #plan<target cuda>, entry = "k", num_args = 1 : i64}
plan.step @decode arena(1048576) sizes ["tokens"] {
^bb0(%tokens: index):
  %h = plan.buffer "hidden" offset(0) (%tokens) : memref<?x256xbf16>
  // expected-error @+1 {{expects smem >= 0, got -1}}
  plan.launch @k [%tokens] grid affine_map<()[s0] -> (s0, 1, 1)> block [256, 1, 1]
      smem -1 (%h) : memref<?x256xbf16>
}

// -----

// Tests that a launch must name a declared kernel.
plan.weight @k : tensor<256xbf16> {section = 0 : i64, offset = 0 : i64}
plan.step @decode arena(1048576) sizes ["tokens"] {
^bb0(%tokens: index):
  %h = plan.buffer "hidden" offset(0) (%tokens) : memref<?x256xbf16>
  // expected-error @+1 {{expects 'k' to name a plan.kernel}}
  plan.launch @k [%tokens] grid affine_map<()[s0] -> (s0, 1, 1)> block [256, 1, 1]
      smem 0 (%h) : memref<?x256xbf16>
}

// -----

// Tests that a launch passes as many arguments as its kernel declares.
plan.kernel @rms_norm {target = #plan<target cuda>, entry = "rms_norm", num_args = 3 : i64}
plan.step @decode arena(1048576) sizes ["tokens"] {
^bb0(%tokens: index):
  %h = plan.buffer "hidden" offset(0) (%tokens) : memref<?x256xbf16>
  // expected-error @+1 {{expects 3 arguments for 'rms_norm', got 2}}
  plan.launch @rms_norm [%tokens] grid affine_map<()[s0] -> (s0, 1, 1)>
      block [256, 1, 1] smem 0 (%h, %h) : memref<?x256xbf16>, memref<?x256xbf16>
}

// -----

// Tests that read_back and sample take one buffer and copy takes two.
plan.step @decode arena(1048576) sizes ["tokens"] {
^bb0(%tokens: index):
  %a = plan.buffer "a" offset(0) (%tokens) : memref<?x512xf32>
  %b = plan.buffer "b" offset(524288) (%tokens) : memref<?x512xf32>
  // expected-error @+1 {{expects 1 buffer operand(s) for read_back, got 2}}
  plan.host read_back (%a, %b) : memref<?x512xf32>, memref<?x512xf32>
}

// -----

// Tests that a host copy is between buffers of one type.
plan.step @decode arena(1048576) sizes ["tokens"] {
^bb0(%tokens: index):
  %a = plan.buffer "a" offset(0) (%tokens) : memref<?x512xf32>
  %b = plan.buffer "b" offset(524288) (%tokens) : memref<?x256xf32>
  // expected-error @+1 {{expects a copy between buffers of one type, got 'memref<?x512xf32>' and 'memref<?x256xf32>'}}
  plan.host copy (%a, %b) : memref<?x512xf32>, memref<?x256xf32>
}

// -----

// Tests that a buffer must hold integer or float elements (their byte size
// is what the arena check counts).
plan.step @s arena(4096) sizes [] {
  // expected-error @+1 {{expects integer or float elements, got 'vector<64xf32>'}}
  %b = plan.buffer "v" offset(0) : memref<2xvector<64xf32>>
}

// -----

// Tests that an offset near the top of int64 cannot wrap past the arena
// check.
plan.step @s arena(256) sizes [] {
  // expected-error @+1 {{expects the buffer of 2048 bytes at offset 9223372036854775552 inside the arena of 256 bytes}}
  %b = plan.buffer "big" offset(9223372036854775552) : memref<512xf32>
}

// -----

// Tests that an extent too large to multiply safely is rejected on its own.
plan.kernel @k {target = #plan<target cuda>, entry = "k", num_args = 0 : i64}
plan.step @s arena(0) sizes [] {
  // expected-error @+1 {{expects a block of three extents in [1, 1024]}}
  plan.launch @k [] grid affine_map<() -> (1, 1, 1)> block [4294967296, 4294967296, 1] smem 0 ()
}

// -----

// Tests that a launch of a kernel no declaration names is rejected.
plan.kernel @barrier {target = #plan<target cuda>, entry = "barrier", num_args = 0 : i64}
plan.step @sync arena(0) sizes [] {
  // expected-error @+1 {{launches 'barrier', which no kernel declaration names}}
  plan.launch @barrier [] grid affine_map<() -> (1, 1, 1)> block [1, 1, 1] smem 0 ()
}

// -----

// Tests that a launch lacking a required parameter is rejected, naming it.
plan.kernel @rms_norm {target = #plan<target cpu>, entry = "rms_norm", num_args = 3 : i64}
plan.step @s arena(4096) sizes [] {
  %x = plan.buffer "x" offset(0) : memref<4x8xf32>
  %w = plan.buffer "w" offset(256) : memref<8xf32>
  %o = plan.buffer "o" offset(512) : memref<4x8xf32>
  // expected-error @+1 {{lacks parameter 'eps' of 'rms_norm'}}
  plan.launch @rms_norm [] grid affine_map<() -> (1, 1, 1)> block [1, 1, 1] smem 0
      (%x, %w, %o) {num_results = 1 : i64} : memref<4x8xf32>, memref<8xf32>, memref<4x8xf32>
}

// -----

// Tests that a parameter the kernel does not declare is rejected.
plan.kernel @rms_norm {target = #plan<target cpu>, entry = "rms_norm", num_args = 3 : i64}
plan.step @s arena(4096) sizes [] {
  %x = plan.buffer "x" offset(0) : memref<4x8xf32>
  %w = plan.buffer "w" offset(256) : memref<8xf32>
  %o = plan.buffer "o" offset(512) : memref<4x8xf32>
  // expected-error @+1 {{passes 'epsilon', which is not a parameter of 'rms_norm'}}
  plan.launch @rms_norm [] grid affine_map<() -> (1, 1, 1)> block [1, 1, 1] smem 0
      (%x, %w, %o) {eps = 1.0e-6 : f64, epsilon = 1.0e-6 : f64, num_results = 1 : i64}
      : memref<4x8xf32>, memref<8xf32>, memref<4x8xf32>
}

// -----

// Tests that a parameter of the wrong type is rejected.
plan.kernel @rms_norm {target = #plan<target cpu>, entry = "rms_norm", num_args = 3 : i64}
plan.step @s arena(4096) sizes [] {
  %x = plan.buffer "x" offset(0) : memref<4x8xf32>
  %w = plan.buffer "w" offset(256) : memref<8xf32>
  %o = plan.buffer "o" offset(512) : memref<4x8xf32>
  // expected-error @+1 {{expects parameter 'eps' of 'rms_norm' to be float, got 1 : i64}}
  plan.launch @rms_norm [] grid affine_map<() -> (1, 1, 1)> block [1, 1, 1] smem 0
      (%x, %w, %o) {eps = 1 : i64, num_results = 1 : i64}
      : memref<4x8xf32>, memref<8xf32>, memref<4x8xf32>
}

// -----

// Tests that an enum parameter must name one of its choices.
plan.kernel @rope {target = #plan<target cpu>, entry = "rope", num_args = 3 : i64}
plan.step @s arena(4096) sizes [] {
  %x = plan.buffer "x" offset(0) : memref<4x8xf32>
  %p = plan.buffer "p" offset(256) : memref<4xi32>
  %o = plan.buffer "o" offset(512) : memref<4x8xf32>
  // expected-error @+1 {{expects parameter 'style' of 'rope' to be one of interleaved|half_split, got "rotated"}}
  plan.launch @rope [] grid affine_map<() -> (1, 1, 1)> block [1, 1, 1] smem 0
      (%x, %p, %o) {dim = 8 : i64, num_results = 1 : i64, offset = 0 : i64,
                    style = "rotated", theta = 1.0e4 : f64}
      : memref<4x8xf32>, memref<4xi32>, memref<4x8xf32>
}

// -----

// Tests that only optional operands may be absent.
plan.kernel @matmul {target = #plan<target cpu>, entry = "matmul", num_args = 2 : i64}
plan.step @s arena(4096) sizes [] {
  %x = plan.buffer "x" offset(0) : memref<4x8xf32>
  %o = plan.buffer "o" offset(512) : memref<4x8xf32>
  // expected-error @+1 {{expects 'absent' to list optional operands of 'matmul' in order; 1 is not one}}
  plan.launch @matmul [] grid affine_map<() -> (1, 1, 1)> block [1, 1, 1] smem 0
      (%x, %o) {absent = array<i64: 1, 2>, num_results = 1 : i64}
      : memref<4x8xf32>, memref<4x8xf32>
}

// -----

// Tests that a launch passes the operands its kernel declares.
plan.kernel @matmul {target = #plan<target cpu>, entry = "matmul", num_args = 2 : i64}
plan.step @s arena(4096) sizes [] {
  %x = plan.buffer "x" offset(0) : memref<4x8xf32>
  %o = plan.buffer "o" offset(512) : memref<4x8xf32>
  // expected-error @+1 {{expects 3 operands for 'matmul', got 1}}
  plan.launch @matmul [] grid affine_map<() -> (1, 1, 1)> block [1, 1, 1] smem 0
      (%x, %o) {num_results = 1 : i64} : memref<4x8xf32>, memref<4x8xf32>
}

// -----

// Tests that a launch says how many of its arguments its kernel's results
// take.
plan.kernel @add {target = #plan<target cpu>, entry = "add", num_args = 3 : i64}
plan.step @s arena(4096) sizes [] {
  %x = plan.buffer "x" offset(0) : memref<8xf32>
  // expected-error @+1 {{expects 'num_results' = 1 for 'add'}}
  plan.launch @add [] grid affine_map<() -> (1, 1, 1)> block [1, 1, 1] smem 0
      (%x, %x, %x) : memref<8xf32>, memref<8xf32>, memref<8xf32>
}

// -----

// Tests that a code image holds PTX text (cubins are assembled from it when
// the artifact is written).
// expected-error @+1 {{expects format "ptx", got "cubin"}}
plan.code_image @library format "cubin" arch "sm_90a" instantiations {} code "x"

// -----

// Tests that a code image names its architecture.
// expected-error @+1 {{expects a non-empty arch}}
plan.code_image @library format "ptx" arch "" instantiations {} code "x"

// -----

// Tests that a code image holds code.
// expected-error @+1 {{expects non-empty code}}
plan.code_image @library format "ptx" arch "sm_90a" instantiations {} code ""

// -----

// Tests that each instantiation of a code image names its entry point.
// expected-error @+1 {{expects each instantiation to name its entry point, got 1 : i64 for 'daybreak_rms_norm_t<128>'}}
plan.code_image @library format "ptx" arch "sm_90a"
    instantiations {"daybreak_rms_norm_t<128>" = 1 : i64} code "x"

// -----

// Tests that a column view passed where the kernel takes dense rows is
// rejected, naming the slot.
plan.kernel @matmul {target = #plan<target cpu>, entry = "matmul", num_args = 3 : i64}
plan.step @s arena(4096) sizes [] {
  %x = plan.buffer "x" offset(0) : memref<4x8xf32>
  %w = plan.buffer "w" offset(256) : memref<4x4xf32>
  %o = plan.buffer "o" offset(512) : memref<4x4xf32>
  %v = plan.column_view %x[4] : memref<4x8xf32> to memref<4x4xf32, strided<[8, 1], offset: 4>>
  // expected-error @+1 {{passes a column view as 'input' of 'matmul', which takes dense rows only}}
  plan.launch @matmul [] grid affine_map<() -> (1, 1, 1)> block [1, 1, 1] smem 0
      (%v, %w, %o) {num_results = 1 : i64, absent = array<i64: 2>}
      : memref<4x4xf32, strided<[8, 1], offset: 4>>, memref<4x4xf32>, memref<4x4xf32>
}

// -----

// Tests that a column view must lie inside its source's rows.
plan.step @s arena(256) sizes [] {
  %x = plan.buffer "x" offset(0) : memref<4x8xf32>
  // expected-error @+1 {{expects columns [6, 10) inside the source's rows of 8}}
  %v = plan.column_view %x[6] : memref<4x8xf32> to memref<4x4xf32, strided<[8, 1], offset: 6>>
}

// -----

// Tests that a column view's type must carry its source's row stride and
// its first column.
plan.step @s arena(256) sizes [] {
  %x = plan.buffer "x" offset(0) : memref<4x8xf32>
  // expected-error @+1 {{expects the view type 'memref<4x4xf32, strided<[8, 1], offset: 2>>', got 'memref<4x4xf32, strided<[4, 1], offset: 2>>'}}
  %v = plan.column_view %x[2] : memref<4x8xf32> to memref<4x4xf32, strided<[4, 1], offset: 2>>
}

// -----

// Tests that a column view is of a plan.buffer's dense rows, not of a view.
plan.step @s arena(256) sizes [] {
  %x = plan.buffer "x" offset(0) : memref<4x8xf32>
  %v = plan.column_view %x[2] : memref<4x8xf32> to memref<4x4xf32, strided<[8, 1], offset: 2>>
  // expected-error @+1 {{expects a plan.buffer's dense rows as its source}}
  %w = plan.column_view %v[0] : memref<4x4xf32, strided<[8, 1], offset: 2>> to memref<4x2xf32, strided<[8, 1], offset: 2>>
}
