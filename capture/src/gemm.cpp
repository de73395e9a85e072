#include "gemm.hpp"

#include <algorithm>
#include <stdexcept>

namespace snapcapture {
namespace {

void check(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + " failed: cuBLAS status " + std::to_string(int(st)));
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::BF16: return CUDA_R_16BF;
    case DType::F32: return CUDA_R_32F;
    case DType::E4M3: return CUDA_R_8F_E4M3;
    case DType::E5M2: return CUDA_R_8F_E5M2;
  }
  return CUDA_R_16BF;
}

bool is_fp8(DType t) { return t == DType::E4M3 || t == DType::E5M2; }

int alignment(const void* p) {
  auto a = reinterpret_cast<uintptr_t>(p);
  int al = 256;
  while (al > 1 && a % al) al /= 2;
  return al;
}

struct Layout {
  cublasLtMatrixLayout_t l = nullptr;
  Layout(DType t, uint64_t rows, uint64_t cols, int64_t ld, int batch, int64_t stride) {
    check(cublasLtMatrixLayoutCreate(&l, cuda_type(t), rows, cols, ld), "cublasLtMatrixLayoutCreate");
    if (batch > 1) {
      int32_t b = batch;
      check(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof b), "layout batch");
      check(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride),
            "layout stride");
    }
  }
  ~Layout() { cublasLtMatrixLayoutDestroy(l); }
};

}  // namespace

const char* dtype_name(DType t) {
  switch (t) {
    case DType::BF16: return "bf16";
    case DType::F32: return "f32";
    case DType::E4M3: return "e4m3";
    case DType::E5M2: return "e5m2";
  }
  return "?";
}

Gemm::Gemm() { check(cublasLtCreate(&handle_), "cublasLtCreate"); }
Gemm::~Gemm() { cublasLtDestroy(handle_); }

std::string Gemm::launch_name(const MatRef& A, const MatRef& B, DType ctype) {
  return std::string("cublasLtMatmul[") + dtype_name(A.type) + " x " + dtype_name(B.type) + " -> " +
         dtype_name(ctype) + "]";
}

void Gemm::run(int m, int n, int k, float alpha, const MatRef& A, const MatRef& B, float beta,
               void* C, DType ctype, int64_t ldc, int64_t stridec, int batch, cudaStream_t s) {
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLASLt's
  // first operand is our B, its second our A, and its M x N is our n x m.
  cublasOperation_t ta = B.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t tb = A.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  bool fp8 = is_fp8(A.type) || is_fp8(B.type);
  if (fp8 && !(ta == CUBLAS_OP_T && tb == CUBLAS_OP_N))
    throw std::logic_error("FP8 matmul needs op(A) = A and op(B) = B^T");

  cublasLtMatmulDesc_t desc = nullptr;
  check(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  struct DescGuard {
    cublasLtMatmulDesc_t d;
    ~DescGuard() { cublasLtMatmulDescDestroy(d); }
  } guard{desc};
  check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "transa");
  check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "transb");
  if (fp8) {
    const float* sa = B.scale_inv;
    const float* sb = A.scale_inv;
    check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa), "a scale");
    check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb), "b scale");
  }
  Layout la(B.type, B.trans ? k : n, B.trans ? n : k, B.ld, batch, B.stride);
  Layout lb(A.type, A.trans ? m : k, A.trans ? k : m, A.ld, batch, A.stride);
  Layout lc(ctype, n, m, ldc, batch, stridec);

  Key key{m, n, k, int(A.type), int(B.type), int(ctype), int(ta) * 2 + int(tb), A.ld, B.ld, ldc,
          A.stride, B.stride, stridec, batch,
          std::min({alignment(A.ptr), alignment(B.ptr), alignment(C)}), int(beta != 0.f) | (workspace_bytes_ > 0 ? 2 : 0)};
  auto it = algos_.find(key);
  if (it == algos_.end()) {
    cublasLtMatmulPreference_t pref = nullptr;
    check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    uint64_t ws = workspace_bytes_;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    uint32_t al_a = uint32_t(alignment(B.ptr)), al_b = uint32_t(alignment(A.ptr)), al_c = uint32_t(alignment(C));
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c);
    cublasLtMatmulHeuristicResult_t res[8] = {};
    int found = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, desc, la.l, lb.l, lc.l, lc.l, pref, 8, res, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    check(st, "cublasLtMatmulAlgoGetHeuristic");
    if (found == 0) throw std::runtime_error("cuBLASLt has no algorithm for " + launch_name(A, B, ctype));
    // Take the first candidate that runs (the heuristic's order is its preference).
    cublasStatus_t last = CUBLAS_STATUS_NOT_SUPPORTED;
    for (int i = 0; i < found; ++i) {
      last = cublasLtMatmul(handle_, desc, &alpha, B.ptr, la.l, A.ptr, lb.l, &beta, C, lc.l, C, lc.l,
                            &res[i].algo, workspace_, workspace_bytes_, s);
      if (last == CUBLAS_STATUS_SUCCESS) {
        algos_.emplace(key, res[i].algo);
        return;
      }
    }
    throw std::runtime_error("cublasLtMatmul failed for " + launch_name(A, B, ctype) + " m=" + std::to_string(m) +
                             " n=" + std::to_string(n) + " k=" + std::to_string(k) + " (" + std::to_string(found) +
                             " candidates): cuBLAS status " + std::to_string(int(last)));
  }
  check(cublasLtMatmul(handle_, desc, &alpha, B.ptr, la.l, A.ptr, lb.l, &beta, C, lc.l, C, lc.l,
                       &it->second, workspace_, workspace_bytes_, s),
        "cublasLtMatmul");
}

}  // namespace snapcapture
