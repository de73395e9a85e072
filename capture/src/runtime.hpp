// snapcapture's runtime: the CUDA device behind the caching allocator,
// device tensors that return their memory to it, and labelled scopes.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>

#include <cuda_runtime.h>

#include "caching_allocator.hpp"
#include "gemm.hpp"

namespace snapcapture {

inline void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// cudaMalloc/cudaFree, optionally capped at `limit` bytes in total (to
// reproduce an out-of-memory error on a large card).
class CudaDevice : public DeviceApi {
 public:
  explicit CudaDevice(uint64_t limit = 0) : limit_(limit) {}
  uint64_t malloc(uint64_t bytes) override {
    if (limit_ && used_ + bytes > limit_) return 0;
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return 0;
    }
    cuda_check(e, "cudaMalloc");
    used_ += bytes;
    sizes_[reinterpret_cast<uint64_t>(p)] = bytes;
    return reinterpret_cast<uint64_t>(p);
  }
  void free(uint64_t addr) override {
    cuda_check(cudaFree(reinterpret_cast<void*>(addr)), "cudaFree");
    auto it = sizes_.find(addr);
    if (it != sizes_.end()) {
      used_ -= it->second;
      sizes_.erase(it);
    }
  }
  int64_t now_us() override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

 private:
  uint64_t limit_;
  uint64_t used_ = 0;
  std::map<uint64_t, uint64_t> sizes_;
};

struct Ctx {
  CachingAllocator& alloc;
  Gemm& gemm;
  cudaStream_t stream = nullptr;
  bool record_kernels = true;
  uint64_t kernel_launches = 0;

  // Records a launch under the current scope; call right before launching.
  void kernel(const std::string& name) {
    ++kernel_launches;
    if (record_kernels) alloc.record_kernel(name, 0);
  }
  void check_launch(const char* what) { cuda_check(cudaGetLastError(), what); }
};

// A device buffer from the caching allocator, returned when the last
// reference goes (autograd's saved tensors and Python variables behave the
// same way, which is what makes the recorded lifetimes faithful).
class Tensor {
 public:
  Tensor(Ctx& c, uint64_t bytes) : c_(c), bytes_(bytes) {
    addr_ = c.alloc.allocate(bytes, 0);
  }
  ~Tensor() { c_.alloc.deallocate(addr_); }
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;
  void* p() const { return reinterpret_cast<void*>(addr_); }
  template <typename T>
  T* as() const { return reinterpret_cast<T*>(addr_); }
  char* bytes_at(uint64_t off) const { return reinterpret_cast<char*>(addr_) + off; }
  uint64_t bytes() const { return bytes_; }

 private:
  Ctx& c_;
  uint64_t addr_ = 0;
  uint64_t bytes_;
};
using TP = std::shared_ptr<Tensor>;
inline TP make_tensor(Ctx& c, uint64_t bytes) { return std::make_shared<Tensor>(c, bytes); }

class Scope {
 public:
  Scope(Ctx& c, const std::string& label) : c_(c) { c_.alloc.push_scope(label); }
  ~Scope() { c_.alloc.pop_scope(); }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  Ctx& c_;
};

}  // namespace snapcapture
