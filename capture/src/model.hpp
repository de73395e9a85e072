// The reference workload: a stack of transformer layers trained with Adam,
// in bf16, FP8 with bf16 primary weights, or FP8 primary weights. Every
// device buffer comes from the caching allocator, under scope labels that
// become the snapshot's stack frames.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels.hpp"
#include "runtime.hpp"

namespace snapcapture {

enum class Mode { BF16, FP8, FP8_PW };
enum class OptimizerKind { Foreach, Loop };
const char* mode_name(Mode m);

struct Config {
  Mode mode = Mode::BF16;
  OptimizerKind optimizer = OptimizerKind::Foreach;
  int layers = 32, heads = 32, head_dim = 128, seq = 4096, batch = 1, iters = 3;
  float lr = 1e-4f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  uint64_t seed = 1234;
  // Size cap of one attention score buffer (fp32, heads chunk x seq x seq).
  uint64_t attn_chunk_bytes = uint64_t(256) << 20;
  int hidden() const { return heads * head_dim; }
  int rows() const { return seq * batch; }
};

struct Param {
  std::string name;
  int64_t rows = 0, cols = 0;  // 1 x n for vectors
  bool fp8 = false;            // stored as FP8 E4M3 + scale (fp8_pw weights)
  TP data;                     // bf16, or e4m3 when fp8
  TP scale;                    // fp8 only: float[2] = {scale, 1/scale}
  TP grad;                     // bf16
  TP exp_avg, exp_avg_sq;      // bf16
  int64_t numel() const { return rows * cols; }
};

struct IterStats {
  int iter = 0;
  double seconds = 0;
  float loss = 0;
  int64_t allocated_after = 0, peak_so_far = 0;
};

class Model {
 public:
  Model(Ctx& ctx, const Config& cfg);
  ~Model();
  // One training iteration: input, forward, loss, backward, Adam step.
  IterStats train_step(int iter);
  // The parameters' bytes by class, for the summary.
  int64_t param_bytes() const;
  int64_t grad_bytes() const;
  int64_t optimizer_state_bytes() const;
  // Called at phase boundaries with a label (the driver samples cudaMemGetInfo).
  std::function<void(const std::string&)> on_phase;

 private:
  friend struct SelfTest;
  struct Layer;
  struct LinearSaved;
  struct LayerSaved;
  TP linear_fwd(Param& w, Param& b, const TP& x, LinearSaved& saved);
  TP linear_bwd(Param& w, Param& b, const TP& dy, LinearSaved& saved);
  TP attention_fwd(const TP& qkv, TP& lse);
  TP attention_bwd(const TP& dO, const TP& qkv, const TP& O, const TP& lse);
  TP layer_fwd(Layer& L, const TP& x, LayerSaved& s);
  TP layer_bwd(Layer& L, const TP& dy, LayerSaved& s);
  void accumulate_grad(Param& p, TP g);
  void cast(const TP& x, int64_t n, k::Fp8 f, TP& q, TP& sc);
  void optimizer_step();
  void adam_single(Param& p, float step_size, float bc2_sqrt);
  std::vector<Param*> params();

  Ctx& c_;
  Config cfg_;
  std::vector<Layer> layers_;
  TP workspace_;
  TP x_, y_;  // the Python variables: input and output of the last iteration
  int step_ = 0;
};

}  // namespace snapcapture
