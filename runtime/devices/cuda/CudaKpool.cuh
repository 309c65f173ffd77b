//===- CudaKpool.cuh - GLM-5.3's DSA k-pool kernels -------------*- CUDA
//-*-===//
//
// dsa_kpool and dsa_kpool_expand (Kernels.def), and the integer division
// that maps positions to pool rows. Included by CudaKernels.cu after
// CudaKda.cuh (stateLoad / stateStore, Weight).
//
// A slot's tokens in a step have consecutive positions in step order (the
// session layer's steps; the CPU kernel checks it), so the members of a
// token's pool that are in the step are found by walking the step's rows
// from the token, backwards and forwards, counting the slot's rows - at
// most P - 1 each way, as short_conv walks its window. The rest of a pool
// from earlier steps is in the slot's tail state. Both kernels are tiny
// next to the indexer scores (a pool's key is P rows of D values read
// once); they are written for clarity, not bandwidth.
//
//===----------------------------------------------------------------------===//

constexpr int kKpoolMaxPool = 64; // tokens a pool (members a block tracks)

/// Token t's pool members as the end of the step knows them: for each
/// member m (position start + m), the step row holding it, or -1 for one in
/// the tail state (an earlier step's); `count` members in all. Also
/// whether t's pool is still incomplete after the step (its tokens then go
/// to the tail state). One thread.
__device__ inline void kpoolMembers(const int32_t *positions,
                                    const int32_t *sequences, int64_t tokens,
                                    int64_t t, int64_t pool, int64_t *rows,
                                    int *count, bool *incomplete) {
  int slot = sequences[t];
  int64_t p = positions[t], start = p / pool * pool;
  int64_t before = p - start, after = start + pool - 1 - p;
  // Backwards: the slot's earlier rows hold positions p - 1, p - 2, ...
  int64_t found = 0;
  for (int64_t r = t - 1; r >= 0 && found < before; --r)
    if (sequences[r] == slot)
      rows[before - 1 - found++] = r;
  for (int64_t m = 0; m < before - found; ++m)
    rows[m] = -1; // earlier steps: the tail state
  rows[before] = t;
  // Forwards: p + 1, p + 2, ... up to the pool's end or the step's.
  int64_t later = 0;
  for (int64_t r = t + 1; r < tokens && later < after; ++r)
    if (sequences[r] == slot)
      rows[before + 1 + later++] = r;
  *count = int(before + 1 + later);
  *incomplete = later < after;
}

/// dsa_kpool's pooled keys: grid (tokens), block 128 (threads over key
/// channels). out[t, c] = sum_m softmax_m(gate + ape)[c] key_m[c] over the
/// members of t's pool known at the end of the step. A token naming a slot
/// outside [0, slots) gets zeros (and stores nothing).
extern "C" __global__ void
daybreak_dsa_kpool(const float *keys, const float *gate, Weight ape,
                   const uint8_t *state, int64_t slotBytes, int32_t stateBf16,
                   const int32_t *positions, const int32_t *sequences,
                   int64_t tokens, int64_t slots, int64_t pool, int64_t width,
                   float *out) {
  __shared__ int64_t rows[kKpoolMaxPool];
  __shared__ int count;
  const int64_t t = blockIdx.x;
  if (sequences[t] < 0 || sequences[t] >= slots) {
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x)
      out[t * width + c] = 0.0f;
    return;
  }
  if (threadIdx.x == 0) {
    bool incomplete;
    kpoolMembers(positions, sequences, tokens, t, pool, rows, &count,
                 &incomplete);
  }
  __syncthreads();
  const uint8_t *tail = state + int64_t(sequences[t]) * slotBytes;
  const int64_t start = positions[t] / pool * pool;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
    // key and gate + ape of member m.
    auto member = [&](int m, float &key, float &logit) {
      int64_t r = rows[m], at = (start + m) % pool * 2 * width;
      key = r >= 0 ? keys[r * width + c] : stateLoad(tail, stateBf16, at + c);
      logit = (r >= 0 ? gate[r * width + c]
                      : stateLoad(tail, stateBf16, at + width + c)) +
              weightAt(ape, m * width + c);
    };
    float key0, top; // the token itself is a member: count >= 1
    member(0, key0, top);
    for (int m = 1; m < count; ++m) {
      float key, logit;
      member(m, key, logit);
      top = fmaxf(top, logit);
    }
    float num = 0.0f, den = 0.0f;
    for (int m = 0; m < count; ++m) {
      float key, logit;
      member(m, key, logit);
      float e = __expf(logit - top);
      num = fmaf(e, key, num);
      den += e;
    }
    out[t * width + c] = num / den;
  }
}

/// dsa_kpool's tail update, after daybreak_dsa_kpool has read the old tail:
/// a token whose pool is still incomplete after the step stores [key |
/// gate] in row position mod P of its slot's state. grid (tokens), block
/// 128.
extern "C" __global__ void daybreak_dsa_kpool_tail(
    const float *keys, const float *gate, uint8_t *state, int64_t slotBytes,
    int32_t stateBf16, const int32_t *positions, const int32_t *sequences,
    int64_t tokens, int64_t slots, int64_t pool, int64_t width) {
  __shared__ int64_t rows[kKpoolMaxPool];
  __shared__ int count;
  __shared__ bool incomplete;
  const int64_t t = blockIdx.x;
  if (sequences[t] < 0 || sequences[t] >= slots)
    return;
  if (threadIdx.x == 0)
    kpoolMembers(positions, sequences, tokens, t, pool, rows, &count,
                 &incomplete);
  __syncthreads();
  if (!incomplete)
    return;
  uint8_t *tail = state + int64_t(sequences[t]) * slotBytes;
  int64_t at = positions[t] % pool * 2 * width;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
    stateStore(tail, stateBf16, at + c, keys[t * width + c]);
    stateStore(tail, stateBf16, at + width + c, gate[t * width + c]);
  }
}

/// dsa_kpool_expand: grid (tokens), block 256. The selected pools come
/// first in pools[t] (dsa_index_select pads with -1 after them): n of them
/// give n * P tokens, then t's own incomplete pool, then -1.
extern "C" __global__ void daybreak_dsa_kpool_expand(const int32_t *pools,
                                                     const int32_t *positions,
                                                     int64_t k, int64_t pool,
                                                     int32_t *out) {
  const int64_t t = blockIdx.x;
  int n = 0;
  for (int64_t i0 = 0; i0 < k; i0 += blockDim.x) {
    int64_t i = i0 + threadIdx.x;
    n += __syncthreads_count(i < k && pools[t * k + i] >= 0);
  }
  const int64_t width = k * pool + pool - 1, p = positions[t];
  const int64_t tailStart = (p + 1) / pool * pool, tail = p + 1 - tailStart;
  for (int64_t o = threadIdx.x; o < width; o += blockDim.x) {
    int64_t v = -1;
    if (o < n * pool)
      v = int64_t(pools[t * k + o / pool]) * pool + o % pool;
    else if (o - n * pool < tail)
      v = tailStart + (o - n * pool);
    out[t * width + o] = int32_t(v);
  }
}

/// out[i] = input[i] / divisor (divisor > 0, inputs >= 0: positions).
/// grid (ceil(n / 256)), block 256.
extern "C" __global__ void daybreak_div_scalar_i32(const int32_t *input,
                                                   int64_t n, int32_t divisor,
                                                   int32_t *out) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = input[i] / divisor;
}
