// snapcapture's CUDA kernels (see kernels.hpp).
#include "kernels.hpp"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>

namespace snapcapture::k {
namespace {

using bf = __nv_bfloat16;

constexpr int kThreads = 256;

__device__ __forceinline__ float ld(const bf* p, size_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void st(bf* p, size_t i, float v) { p[i] = __float2bfloat16(v); }

unsigned blocks_for(size_t n, int per_block = kThreads) {
  size_t b = (n + per_block - 1) / per_block;
  return unsigned(std::min<size_t>(std::max<size_t>(b, 1), 65535u * 32u));
}

// Block-wide sum of one float per thread (blockDim.x a multiple of 32, <= 1024).
__device__ float block_sum(float v) {
  __shared__ float warp_sums[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  __syncthreads();  // warp_sums may still be read by a previous call
  if (lane == 0) warp_sums[w] = v;
  __syncthreads();
  int nw = blockDim.x >> 5;
  float t = lane < nw ? warp_sums[lane] : 0.f;
  for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
  return t;  // every thread gets the total
}

__device__ float block_max(float v) {
  __shared__ float warp_max[32];
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) warp_max[w] = v;
  __syncthreads();
  int nw = blockDim.x >> 5;
  float t = lane < nw ? warp_max[lane] : -INFINITY;
  for (int o = 16; o > 0; o >>= 1) t = fmaxf(t, __shfl_xor_sync(0xffffffffu, t, o));
  return t;
}

__device__ __forceinline__ uint64_t splitmix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__global__ void fill_uniform_kernel(bf* x, size_t n, uint64_t seed, float lo, float span) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    float u = float(splitmix(seed * 0x100000001B3ull + i) >> 40) * (1.0f / 16777216.0f);
    st(x, i, lo + span * u);
  }
}

__global__ void fill_const_kernel(bf* x, size_t n, float v) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    st(x, i, v);
}

__global__ void fill_const_f32_kernel(float* x, size_t n, float v) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    x[i] = v;
}

// One block per row.
__global__ void layernorm_fwd_kernel(const bf* x, const bf* g, const bf* b, bf* y, float* mean,
                                     float* rstd, int cols) {
  const bf* xr = x + size_t(blockIdx.x) * cols;
  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += ld(xr, c);
  float mu = block_sum(s) / float(cols);
  float v = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float d = ld(xr, c) - mu;
    v += d * d;
  }
  float rs = rsqrtf(block_sum(v) / float(cols) + 1e-5f);
  bf* yr = y + size_t(blockIdx.x) * cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x)
    st(yr, c, (ld(xr, c) - mu) * rs * ld(g, c) + ld(b, c));
  if (threadIdx.x == 0) {
    mean[blockIdx.x] = mu;
    rstd[blockIdx.x] = rs;
  }
}

// A block handles kRowsPerBlock rows; dgamma/dbeta partials for all columns
// are kept in shared memory and added to the global accumulators once.
constexpr int kLnRowsPerBlock = 32;
__global__ void layernorm_bwd_kernel(const bf* dy, const bf* x, const float* mean,
                                     const float* rstd, const bf* g, const bf* dres, bf* dx,
                                     float* dgamma, float* dbeta, int rows, int cols) {
  extern __shared__ float part[];  // 2 * cols
  float* pg = part;
  float* pb = part + cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) pg[c] = pb[c] = 0.f;
  __syncthreads();
  int r0 = blockIdx.x * kLnRowsPerBlock;
  int r1 = min(rows, r0 + kLnRowsPerBlock);
  for (int r = r0; r < r1; ++r) {
    const bf* dyr = dy + size_t(r) * cols;
    const bf* xr = x + size_t(r) * cols;
    float mu = mean[r], rs = rstd[r];
    float s1 = 0.f, s2 = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
      float xh = (ld(xr, c) - mu) * rs;
      float dxh = ld(dyr, c) * ld(g, c);
      s1 += dxh;
      s2 += dxh * xh;
      pg[c] += ld(dyr, c) * xh;
      pb[c] += ld(dyr, c);
    }
    float m1 = block_sum(s1) / float(cols);
    float m2 = block_sum(s2) / float(cols);
    bf* dxr = dx + size_t(r) * cols;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
      float xh = (ld(xr, c) - mu) * rs;
      float dxh = ld(dyr, c) * ld(g, c);
      float v = rs * (dxh - m1 - xh * m2);
      if (dres) v += ld(dres, size_t(r) * cols + c);
      st(dxr, c, v);
    }
  }
  __syncthreads();
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    atomicAdd(dgamma + c, pg[c]);
    atomicAdd(dbeta + c, pb[c]);
  }
}

__device__ __forceinline__ float gelu_tanh(float x, float* dgelu) {
  const float k0 = 0.7978845608028654f;  // sqrt(2 / pi)
  const float k1 = 0.044715f;
  float u = k0 * (x + k1 * x * x * x);
  float t = tanhf(u);
  if (dgelu) {
    float du = k0 * (1.f + 3.f * k1 * x * x);
    *dgelu = 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * du;
  }
  return 0.5f * x * (1.f + t);
}

__global__ void gelu_fwd_kernel(const bf* x, bf* y, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    st(y, i, gelu_tanh(ld(x, i), nullptr));
}

__global__ void gelu_bwd_kernel(const bf* dy, const bf* x, bf* dx, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    float d;
    gelu_tanh(ld(x, i), &d);
    st(dx, i, ld(dy, i) * d);
  }
}

__global__ void add_bias_kernel(bf* y, const bf* bias, size_t n, int cols) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    st(y, i, ld(y, i) + ld(bias, i % cols));
}

// Block (x: column tile of 256, y: row chunk).
constexpr int kColSumRows = 128;
__global__ void column_sum_kernel(const bf* dy, float* acc, int rows, int cols) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  int r0 = blockIdx.y * kColSumRows, r1 = min(rows, r0 + kColSumRows);
  float s = 0.f;
  for (int r = r0; r < r1; ++r) s += ld(dy, size_t(r) * cols + c);
  atomicAdd(acc + c, s);
}

__global__ void add_kernel(const bf* a, const bf* b, bf* out, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    st(out, i, ld(a, i) + ld(b, i));
}

__global__ void f32_to_bf16_kernel(const float* a, bf* out, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    st(out, i, a[i]);
}

__global__ void sum_kernel(const bf* x, size_t n, float* out) {
  float s = 0.f;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    s += ld(x, i);
  s = block_sum(s);
  if (threadIdx.x == 0) atomicAdd(out, s);
}

__global__ void amax_kernel(const bf* x, size_t n, float* out) {
  float m = 0.f;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    m = fmaxf(m, fabsf(ld(x, i)));
  m = block_max(m);
  // Non-negative floats order like their bit patterns as ints.
  if (threadIdx.x == 0) atomicMax(reinterpret_cast<int*>(out), __float_as_int(m));
}

__global__ void compute_scale_kernel(const float* amax, float fmax, float* sc) {
  float a = *amax;
  float scale = (a > 0.f && isfinite(a)) ? fmax / a : 1.f;
  sc[0] = 1.f / scale;
  sc[1] = scale;
}

template <typename Q>
__global__ void cast_fp8_kernel(const bf* x, const float* sc, Q* q, size_t n) {
  float scale = sc[1];
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    q[i] = Q(ld(x, i) * scale);  // the __nv_fp8 constructors saturate to the finite range
}

template <typename Q>
__global__ void dequant_fp8_kernel(const Q* q, const float* sc, bf* x, size_t n) {
  float inv = sc[0];
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    st(x, i, float(q[i]) * inv);
}

// 32x32 tiles through shared memory.
__global__ void transpose_u8_kernel(const uint8_t* in, uint8_t* out, int rows, int cols) {
  __shared__ uint8_t tile[32][33];
  int c = blockIdx.x * 32 + threadIdx.x;
  for (int j = threadIdx.y; j < 32; j += blockDim.y) {
    int r = blockIdx.y * 32 + j;
    if (r < rows && c < cols) tile[j][threadIdx.x] = in[size_t(r) * cols + c];
  }
  __syncthreads();
  int r = blockIdx.y * 32 + threadIdx.x;
  for (int j = threadIdx.y; j < 32; j += blockDim.y) {
    int cc = blockIdx.x * 32 + j;
    if (r < rows && cc < cols) out[size_t(cc) * rows + r] = tile[threadIdx.x][j];
  }
}

// One block per row of one head: blockIdx.x = h * seq + i.
__global__ void softmax_fwd_kernel(const float* S, bf* P, float* lse, int seq, int lse_stride,
                                   bool write_lse, bool use_lse) {
  int h = blockIdx.x / seq, i = blockIdx.x % seq;
  const float* sr = S + (size_t(h) * seq + i) * seq;
  bf* pr = P + (size_t(h) * seq + i) * seq;
  float l;
  if (use_lse) {
    l = lse[size_t(h) * lse_stride + i];
  } else {
    float m = -INFINITY;
    for (int j = threadIdx.x; j <= i; j += blockDim.x) m = fmaxf(m, sr[j]);
    m = block_max(m);
    float s = 0.f;
    for (int j = threadIdx.x; j <= i; j += blockDim.x) s += __expf(sr[j] - m);
    s = block_sum(s);
    l = m + logf(s);
    if (write_lse && threadIdx.x == 0) lse[size_t(h) * lse_stride + i] = l;
  }
  for (int j = threadIdx.x; j < seq; j += blockDim.x) st(pr, j, j <= i ? __expf(sr[j] - l) : 0.f);
}

__global__ void softmax_bwd_kernel(const float* dP, const float* Dr, bf* P, int seq,
                                   int d_stride) {
  int h = blockIdx.x / seq, i = blockIdx.x % seq;
  size_t off = (size_t(h) * seq + i) * seq;
  float d = Dr[size_t(h) * d_stride + i];
  for (int j = threadIdx.x; j < seq; j += blockDim.x) {
    float p = ld(P + off, j);
    st(P + off, j, j <= i ? p * (dP[off + j] - d) : 0.f);
  }
}

// One warp per (b, h, i) row.
__global__ void attn_rowdot_kernel(const bf* dO, const bf* O, float* Dr, int seq, int batch,
                                   int heads, int head_dim) {
  size_t w = (blockIdx.x * size_t(blockDim.x) + threadIdx.x) / 32;
  int lane = threadIdx.x & 31;
  size_t total = size_t(seq) * batch * heads;
  if (w >= total) return;
  int i = int(w % seq);
  int h = int((w / seq) % heads);
  int b = int(w / (size_t(seq) * heads));
  size_t base = (size_t(i) * batch + b) * size_t(heads) * head_dim + size_t(h) * head_dim;
  float s = 0.f;
  for (int j = lane; j < head_dim; j += 32) s += ld(dO, base + j) * ld(O, base + j);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) Dr[w] = s;
}

constexpr int kMaxListTensors = 48;
constexpr int64_t kAdamChunk = 65536;
struct AdamList {
  TensorRef t[kMaxListTensors];
  int block_start[kMaxListTensors + 1];
  int count;
};

__global__ void adam_stage_kernel(AdamList L, AdamOp op, float w) {
  int b = blockIdx.x;
  int ti = 0;
  while (ti + 1 < L.count && L.block_start[ti + 1] <= b) ++ti;
  const TensorRef& t = L.t[ti];
  int64_t chunk0 = int64_t(b - L.block_start[ti]) * kAdamChunk;
  int64_t end = min(t.n, chunk0 + kAdamChunk);
  bf* out = static_cast<bf*>(t.out);
  const bf* a = static_cast<const bf*>(t.a);
  const bf* bb = static_cast<const bf*>(t.b);
  const bf* c = static_cast<const bf*>(t.c);
  for (int64_t i = chunk0 + threadIdx.x; i < end; i += blockDim.x) {
    float av = ld(a, i), r = 0.f;
    switch (op) {
      case AdamOp::Lerp: r = av + w * (ld(bb, i) - av); break;
      case AdamOp::Mul: r = av * w; break;
      case AdamOp::AddcmulSq: { float g = ld(bb, i); r = av + w * g * g; break; }
      case AdamOp::Sqrt: r = sqrtf(av); break;
      case AdamOp::DivScalar: r = av / w; break;
      case AdamOp::AddScalar: r = av + w; break;
      case AdamOp::Addcdiv: r = av + w * ld(bb, i) / ld(c, i); break;
    }
    st(out, i, r);
  }
}

}  // namespace

float fp8_max(Fp8 f) { return f == Fp8::E4M3 ? 448.f : 57344.f; }

void fill_uniform_bf16(bf16p x, size_t n, uint64_t seed, float lo, float hi, cudaStream_t s) {
  fill_uniform_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<bf*>(x), n, seed, lo, hi - lo);
}
void fill_const_bf16(bf16p x, size_t n, float v, cudaStream_t s) {
  fill_const_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<bf*>(x), n, v);
}
void fill_const_f32(float* x, size_t n, float v, cudaStream_t s) {
  fill_const_f32_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, n, v);
}

void layernorm_fwd(cbf16p x, cbf16p gamma, cbf16p beta, bf16p y, float* mean, float* rstd,
                   int rows, int cols, cudaStream_t s) {
  layernorm_fwd_kernel<<<rows, kThreads, 0, s>>>(
      static_cast<const bf*>(x), static_cast<const bf*>(gamma), static_cast<const bf*>(beta),
      static_cast<bf*>(y), mean, rstd, cols);
}

void layernorm_bwd(cbf16p dy, cbf16p x, const float* mean, const float* rstd, cbf16p gamma,
                   cbf16p dres, bf16p dx, float* dgamma, float* dbeta, int rows, int cols,
                   cudaStream_t s) {
  size_t smem = size_t(2) * cols * sizeof(float);
  static bool attr_set = false;
  if (!attr_set && smem > 48 * 1024) {
    cudaFuncSetAttribute(layernorm_bwd_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         200 * 1024);
    attr_set = true;
  }
  int blocks = (rows + kLnRowsPerBlock - 1) / kLnRowsPerBlock;
  layernorm_bwd_kernel<<<blocks, kThreads, smem, s>>>(
      static_cast<const bf*>(dy), static_cast<const bf*>(x), mean, rstd,
      static_cast<const bf*>(gamma), static_cast<const bf*>(dres), static_cast<bf*>(dx), dgamma,
      dbeta, rows, cols);
}

void gelu_fwd(cbf16p x, bf16p y, size_t n, cudaStream_t s) {
  gelu_fwd_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const bf*>(x), static_cast<bf*>(y), n);
}
void gelu_bwd(cbf16p dy, cbf16p x, bf16p dx, size_t n, cudaStream_t s) {
  gelu_bwd_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const bf*>(dy), static_cast<const bf*>(x),
                                                     static_cast<bf*>(dx), n);
}
void add_bias(bf16p y, cbf16p bias, int rows, int cols, cudaStream_t s) {
  size_t n = size_t(rows) * cols;
  add_bias_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<bf*>(y), static_cast<const bf*>(bias), n, cols);
}
void column_sum(cbf16p dy, float* acc, int rows, int cols, cudaStream_t s) {
  dim3 grid((cols + kThreads - 1) / kThreads, (rows + kColSumRows - 1) / kColSumRows);
  column_sum_kernel<<<grid, kThreads, 0, s>>>(static_cast<const bf*>(dy), acc, rows, cols);
}
void add(cbf16p a, cbf16p b, bf16p out, size_t n, cudaStream_t s) {
  add_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const bf*>(a), static_cast<const bf*>(b),
                                                static_cast<bf*>(out), n);
}
void f32_to_bf16(const float* acc, bf16p out, size_t n, cudaStream_t s) {
  f32_to_bf16_kernel<<<blocks_for(n), kThreads, 0, s>>>(acc, static_cast<bf*>(out), n);
}
void sum(cbf16p x, size_t n, float* out, cudaStream_t s) {
  sum_kernel<<<std::min(blocks_for(n), 4096u), kThreads, 0, s>>>(static_cast<const bf*>(x), n, out);
}
void amax_bf16(cbf16p x, size_t n, float* out, cudaStream_t s) {
  amax_kernel<<<std::min(blocks_for(n), 4096u), kThreads, 0, s>>>(static_cast<const bf*>(x), n, out);
}
void compute_scale(const float* amax, Fp8 f, float* sc, cudaStream_t s) {
  compute_scale_kernel<<<1, 1, 0, s>>>(amax, fp8_max(f), sc);
}
void cast_fp8(cbf16p x, const float* sc, void* q, size_t n, Fp8 f, cudaStream_t s) {
  if (f == Fp8::E4M3)
    cast_fp8_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const bf*>(x), sc,
                                                       static_cast<__nv_fp8_e4m3*>(q), n);
  else
    cast_fp8_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const bf*>(x), sc,
                                                       static_cast<__nv_fp8_e5m2*>(q), n);
}
void dequant_fp8(const void* q, const float* sc, Fp8 f, bf16p x, size_t n, cudaStream_t s) {
  if (f == Fp8::E4M3)
    dequant_fp8_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const __nv_fp8_e4m3*>(q), sc,
                                                          static_cast<bf*>(x), n);
  else
    dequant_fp8_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const __nv_fp8_e5m2*>(q), sc,
                                                          static_cast<bf*>(x), n);
}
void transpose_u8(const void* in, void* out, int rows, int cols, cudaStream_t s) {
  dim3 grid((cols + 31) / 32, (rows + 31) / 32), block(32, 8);
  transpose_u8_kernel<<<grid, block, 0, s>>>(static_cast<const uint8_t*>(in), static_cast<uint8_t*>(out),
                                             rows, cols);
}
void softmax_causal_fwd(const float* S, bf16p P, float* lse, int nh, int seq, int lse_stride,
                        cudaStream_t s) {
  softmax_fwd_kernel<<<nh * seq, kThreads, 0, s>>>(S, static_cast<bf*>(P), lse, seq, lse_stride, true, false);
}
void softmax_causal_recompute(const float* S, const float* lse, bf16p P, int nh, int seq,
                              int lse_stride, cudaStream_t s) {
  softmax_fwd_kernel<<<nh * seq, kThreads, 0, s>>>(S, static_cast<bf*>(P), const_cast<float*>(lse),
                                                   seq, lse_stride, false, true);
}
void softmax_causal_bwd(const float* dP, const float* Dr, bf16p P_dS, int nh, int seq,
                        int d_stride, cudaStream_t s) {
  softmax_bwd_kernel<<<nh * seq, kThreads, 0, s>>>(dP, Dr, static_cast<bf*>(P_dS), seq, d_stride);
}
void attn_rowdot(cbf16p dO, cbf16p O, float* Dr, int seq, int batch, int heads, int head_dim,
                 cudaStream_t s) {
  size_t rows = size_t(seq) * batch * heads;
  attn_rowdot_kernel<<<blocks_for(rows * 32), kThreads, 0, s>>>(
      static_cast<const bf*>(dO), static_cast<const bf*>(O), Dr, seq, batch, heads, head_dim);
}

int adam_stage(AdamOp op, const TensorRef* tensors, int count, float w, cudaStream_t s) {
  int launches = 0;
  for (int start = 0; start < count; start += kMaxListTensors) {
    AdamList L{};
    L.count = std::min(kMaxListTensors, count - start);
    int blocks = 0;
    for (int i = 0; i < L.count; ++i) {
      L.t[i] = tensors[start + i];
      L.block_start[i] = blocks;
      blocks += int((L.t[i].n + kAdamChunk - 1) / kAdamChunk);
    }
    L.block_start[L.count] = blocks;
    if (blocks == 0) continue;
    adam_stage_kernel<<<blocks, 512, 0, s>>>(L, op, w);
    ++launches;
  }
  return launches;
}

}  // namespace snapcapture::k
