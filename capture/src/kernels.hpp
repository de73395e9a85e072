// snapcapture's CUDA kernels, behind plain host functions. Each one launches
// on `s` and returns without synchronizing; none allocates memory (every
// buffer comes from the caching allocator, through the caller).
//
// Kernels are written to be simple and correct first: fp32 arithmetic, bf16
// or FP8 storage. selftest.cpp checks each against a CPU reference.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace snapcapture::k {

// Storage types are passed as raw bytes; bf16 = 2 bytes, fp8 = 1 byte.
using bf16p = void*;
using cbf16p = const void*;

enum class Fp8 { E4M3, E5M2 };
// Largest finite value of each FP8 format (OCP FP8: 448 and 57344).
float fp8_max(Fp8 f);

// x[i] = lo + (hi - lo) * u(seed, i), u uniform in [0, 1): a counter-based
// hash, so the values do not depend on the launch shape.
void fill_uniform_bf16(bf16p x, size_t n, uint64_t seed, float lo, float hi, cudaStream_t s);
void fill_const_bf16(bf16p x, size_t n, float v, cudaStream_t s);
void fill_const_f32(float* x, size_t n, float v, cudaStream_t s);

// LayerNorm over the last dimension (rows x cols, row-major), eps 1e-5.
void layernorm_fwd(cbf16p x, cbf16p gamma, cbf16p beta, bf16p y, float* mean, float* rstd,
                   int rows, int cols, cudaStream_t s);
// dx = LN'(dy) + (dres or 0); dgamma/dbeta (fp32, cols) are accumulated into
// and must be zeroed by the caller.
void layernorm_bwd(cbf16p dy, cbf16p x, const float* mean, const float* rstd, cbf16p gamma,
                   cbf16p dres, bf16p dx, float* dgamma, float* dbeta, int rows, int cols,
                   cudaStream_t s);

// GELU, tanh approximation (PyTorch's approximate="tanh").
void gelu_fwd(cbf16p x, bf16p y, size_t n, cudaStream_t s);
void gelu_bwd(cbf16p dy, cbf16p x, bf16p dx, size_t n, cudaStream_t s);

// y[r, c] += bias[c] (rows x cols).
void add_bias(bf16p y, cbf16p bias, int rows, int cols, cudaStream_t s);
// acc[c] += sum over rows of dy[r, c] (fp32 accumulator, zeroed by the caller).
void column_sum(cbf16p dy, float* acc, int rows, int cols, cudaStream_t s);
// out = a + b (out may alias a or b).
void add(cbf16p a, cbf16p b, bf16p out, size_t n, cudaStream_t s);
// out = bf16(acc).
void f32_to_bf16(const float* acc, bf16p out, size_t n, cudaStream_t s);
// *out += sum(x) (fp32).
void sum(cbf16p x, size_t n, float* out, cudaStream_t s);

// amax: *out = max |x| (out zeroed by the caller).
void amax_bf16(cbf16p x, size_t n, float* out, cudaStream_t s);
// From an amax: sc[0] = 1 / scale (what cuBLASLt multiplies with; first, so
// the pointer cuBLASLt gets is as aligned as the buffer), sc[1] = scale =
// fp8_max / amax (1 when amax is 0).
void compute_scale(const float* amax, Fp8 f, float* sc, cudaStream_t s);
// q = fp8(x * sc[1]), saturating.
void cast_fp8(cbf16p x, const float* sc, void* q, size_t n, Fp8 f, cudaStream_t s);
// x = bf16(q * sc[0]).
void dequant_fp8(const void* q, const float* sc, Fp8 f, bf16p x, size_t n, cudaStream_t s);
// out (cols x rows) = in (rows x cols)^T for 1-byte elements.
void transpose_u8(const void* in, void* out, int rows, int cols, cudaStream_t s);

// Causal softmax over the rows of `nh` score matrices S (seq x seq, fp32,
// contiguous, one after the other): P = softmax(S) in bf16 with zeros above
// the diagonal, lse[h * lse_stride + i] = log-sum-exp of row i.
void softmax_causal_fwd(const float* S, bf16p P, float* lse, int nh, int seq, int lse_stride,
                        cudaStream_t s);
// Recompute P from S and the saved lse (bf16, zeros above the diagonal).
void softmax_causal_recompute(const float* S, const float* lse, bf16p P, int nh, int seq,
                              int lse_stride, cudaStream_t s);
// dS = P * (dP - Dr[i]) in place over P (bf16), dP fp32.
void softmax_causal_bwd(const float* dP, const float* Dr, bf16p P_dS, int nh, int seq,
                        int d_stride, cudaStream_t s);
// Dr[(b * heads + h) * seq + i] = sum_j dO[i, b, h, j] * O[i, b, h, j]
// for O/dO laid out (seq, batch, heads * head_dim).
void attn_rowdot(cbf16p dO, cbf16p O, float* Dr, int seq, int batch, int heads, int head_dim,
                 cudaStream_t s);

// Adam stages over a list of tensors, the way torch.optim's multi-tensor
// path runs them (one launch per stage over all tensors). All bf16.
enum class AdamOp {
  Lerp,       // a += w * (b - a)           (exp_avg.lerp_(grad, 1 - beta1))
  Mul,        // a *= w                     (exp_avg_sq.mul_(beta2))
  AddcmulSq,  // a += w * b * b             (exp_avg_sq.addcmul_(grad, grad, 1 - beta2))
  Sqrt,       // out = sqrt(a)              (new tensor)
  DivScalar,  // out = a / w                (new tensor, or in place when out == a)
  AddScalar,  // a += w
  Addcdiv,    // a += w * b / c             (param.addcdiv_(exp_avg, denom, -step_size))
};
struct TensorRef {
  void* out;        // written (may equal a)
  const void* a;
  const void* b;
  const void* c;
  int64_t n;
};
// Runs `op` over `count` tensors with scalar w, in launches of up to 48
// tensors each. Returns the number of kernel launches.
int adam_stage(AdamOp op, const TensorRef* tensors, int count, float w, cudaStream_t s);

}  // namespace snapcapture::k
