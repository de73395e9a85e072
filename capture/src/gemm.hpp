// Matrix products through cuBLASLt, described in row-major terms.
//
// C (m x n) = alpha * op(A) * op(B) + beta * C, where op(A) is m x k (A is
// stored m x k, or k x m when transposed) and op(B) is k x n (B stored k x n,
// or n x k when transposed). Batches are strided. For FP8 inputs cuBLASLt on
// Hopper takes only op(A) = A and op(B) = B^T (both operands with k
// contiguous), and each operand's dequantization scale (1 / quantization
// scale) as a device pointer.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include <cublasLt.h>
#include <cuda_runtime.h>

namespace snapcapture {

enum class DType { BF16, F32, E4M3, E5M2 };
const char* dtype_name(DType t);

struct MatRef {
  const void* ptr = nullptr;
  DType type = DType::BF16;
  int64_t ld = 0;      // row-major leading dimension (elements between rows)
  int64_t stride = 0;  // elements between batch entries
  bool trans = false;
  const float* scale_inv = nullptr;  // FP8 only: device pointer
};

class Gemm {
 public:
  Gemm();
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  void set_workspace(void* ptr, size_t bytes) {
    workspace_ = ptr;
    workspace_bytes_ = bytes;
  }
  void run(int m, int n, int k, float alpha, const MatRef& A, const MatRef& B, float beta,
           void* C, DType ctype, int64_t ldc, int64_t stridec, int batch, cudaStream_t s);
  // "cublasLtMatmul[e4m3 x e4m3 -> bf16]": the name snapcapture records for a launch.
  static std::string launch_name(const MatRef& A, const MatRef& B, DType ctype);

 private:
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  using Key = std::tuple<int, int, int, int, int, int, int, int64_t, int64_t, int64_t, int64_t,
                         int64_t, int64_t, int, int, int>;
  std::map<Key, cublasLtMatmulAlgo_t> algos_;
};

}  // namespace snapcapture
