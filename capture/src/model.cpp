#include "model.hpp"

#include <chrono>
#include <cmath>

namespace snapcapture {

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::BF16: return "bf16";
    case Mode::FP8: return "fp8";
    case Mode::FP8_PW: return "fp8_pw";
  }
  return "?";
}

struct Model::Layer {
  Param ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc1_w, fc1_b, fc2_w, fc2_b;
  std::vector<Param*> all() {
    return {&ln1_w, &ln1_b, &qkv_w, &qkv_b, &proj_w, &proj_b,
            &ln2_w, &ln2_b, &fc1_w, &fc1_b, &fc2_w, &fc2_b};
  }
};

// What a linear layer keeps for its backward, like autograd's saved tensors.
struct Model::LinearSaved {
  TP x;         // bf16 input (bf16 mode)
  TP xt8, xsc;  // FP8 input, transposed (k x m), and its scale (fp8 modes)
  TP wt8, wsc;  // FP8 weight, transposed (in x out), and its scale (fp8 modes)
};

struct Model::LayerSaved {
  TP x, mean1, rstd1;
  LinearSaved qkv;
  TP qkv_out, attn_out, lse;
  LinearSaved proj;
  TP h1, mean2, rstd2;
  LinearSaved fc1;
  TP fc1_out;
  LinearSaved fc2;
};

namespace {
constexpr uint64_t kBf16 = 2;
constexpr uint64_t kWorkspaceBytes = uint64_t(32) << 20;  // PyTorch's on Hopper
}

Model::Model(Ctx& c, const Config& cfg) : c_(c), cfg_(cfg) {
  const int64_t h = cfg.hidden();
  Scope init(c_, "init");
  layers_.resize(size_t(cfg.layers));
  uint64_t seed = cfg.seed;
  for (int li = 0; li < cfg.layers; ++li) {
    Scope sl(c_, "layer " + std::to_string(li));
    Layer& L = layers_[size_t(li)];
    auto declare = [&](Param& p, const char* name, int64_t rows, int64_t cols) {
      p.name = "layers." + std::to_string(li) + "." + name;
      p.rows = rows;
      p.cols = cols;
    };
    auto vec = [&](Param& p, const char* name, int64_t n, float v) {
      Scope sp(c_, name);
      declare(p, name, 1, n);
      p.data = make_tensor(c_, uint64_t(n) * kBf16);
      c_.kernel("fill_const");
      k::fill_const_bf16(p.data->p(), size_t(n), v, c_.stream);
    };
    auto bias = [&](Param& p, const char* name, int64_t n, int64_t fan_in) {
      Scope sp(c_, name);
      declare(p, name, 1, n);
      p.data = make_tensor(c_, uint64_t(n) * kBf16);
      float bound = 1.f / std::sqrt(float(fan_in));
      c_.kernel("fill_uniform");
      k::fill_uniform_bf16(p.data->p(), size_t(n), ++seed, -bound, bound, c_.stream);
    };
    auto weight = [&](Param& p, const char* name, int64_t out, int64_t in) {
      Scope sp(c_, name);
      declare(p, name, out, in);
      float bound = 1.f / std::sqrt(float(in));  // nn.Linear's default
      size_t n = size_t(out * in);
      if (cfg_.mode != Mode::FP8_PW) {
        p.data = make_tensor(c_, n * kBf16);
        c_.kernel("fill_uniform");
        k::fill_uniform_bf16(p.data->p(), n, ++seed, -bound, bound, c_.stream);
        return;
      }
      // FP8 primary weights: initialize in bf16, quantize, keep only the FP8 copy.
      p.fp8 = true;
      TP tmp = make_tensor(c_, n * kBf16);
      c_.kernel("fill_uniform");
      k::fill_uniform_bf16(tmp->p(), n, ++seed, -bound, bound, c_.stream);
      cast(tmp, int64_t(n), k::Fp8::E4M3, p.data, p.scale);
    };
    vec(L.ln1_w, "ln1.weight", h, 1.f);
    vec(L.ln1_b, "ln1.bias", h, 0.f);
    weight(L.qkv_w, "qkv.weight", 3 * h, h);
    bias(L.qkv_b, "qkv.bias", 3 * h, h);
    weight(L.proj_w, "proj.weight", h, h);
    bias(L.proj_b, "proj.bias", h, h);
    vec(L.ln2_w, "ln2.weight", h, 1.f);
    vec(L.ln2_b, "ln2.bias", h, 0.f);
    weight(L.fc1_w, "fc1.weight", 3 * h, h);
    bias(L.fc1_b, "fc1.bias", 3 * h, h);
    weight(L.fc2_w, "fc2.weight", h, 3 * h);
    bias(L.fc2_b, "fc2.bias", h, 3 * h);
  }
  c_.check_launch("init");
}

Model::~Model() {
  if (workspace_) c_.gemm.set_workspace(nullptr, 0);
}

std::vector<Param*> Model::params() {
  std::vector<Param*> out;
  for (Layer& L : layers_)
    for (Param* p : L.all()) out.push_back(p);
  return out;
}

int64_t Model::param_bytes() const {
  int64_t s = 0;
  for (const Layer& L : layers_)
    for (Param* p : const_cast<Layer&>(L).all())
      s += int64_t(p->data->bytes()) + (p->scale ? int64_t(p->scale->bytes()) : 0);
  return s;
}
int64_t Model::grad_bytes() const {
  int64_t s = 0;
  for (const Layer& L : layers_)
    for (Param* p : const_cast<Layer&>(L).all())
      if (p->grad) s += int64_t(p->grad->bytes());
  return s;
}
int64_t Model::optimizer_state_bytes() const {
  int64_t s = 0;
  for (const Layer& L : layers_)
    for (Param* p : const_cast<Layer&>(L).all())
      if (p->exp_avg) s += int64_t(p->exp_avg->bytes() + p->exp_avg_sq->bytes());
  return s;
}

// Per-tensor current scaling: amax -> scale -> saturating cast.
void Model::cast(const TP& x, int64_t n, k::Fp8 f, TP& q, TP& sc) {
  TP amax = make_tensor(c_, sizeof(float));
  cuda_check(cudaMemsetAsync(amax->p(), 0, sizeof(float), c_.stream), "memset");
  c_.kernel("amax");
  k::amax_bf16(x->p(), size_t(n), amax->as<float>(), c_.stream);
  sc = make_tensor(c_, 2 * sizeof(float));
  c_.kernel("compute_scale");
  k::compute_scale(amax->as<float>(), f, sc->as<float>(), c_.stream);
  q = make_tensor(c_, uint64_t(n));
  c_.kernel(f == k::Fp8::E4M3 ? "cast_fp8_e4m3" : "cast_fp8_e5m2");
  k::cast_fp8(x->p(), sc->as<float>(), q->p(), size_t(n), f, c_.stream);
}

void Model::accumulate_grad(Param& p, TP g) {
  Scope s(c_, "AccumulateGrad");
  if (!p.grad) {
    p.grad = std::move(g);  // the first gradient becomes .grad
    return;
  }
  c_.kernel("add_");
  k::add(p.grad->p(), g->p(), p.grad->p(), size_t(p.numel()), c_.stream);
}

TP Model::linear_fwd(Param& w, Param& b, const TP& x, LinearSaved& saved) {
  const int m = cfg_.rows();
  const int n = int(w.rows), kk = int(w.cols);
  if (!workspace_) {
    // cuBLASLt's workspace, taken at the first matmul like PyTorch's.
    Scope s(c_, "cublasLtWorkspace");
    workspace_ = make_tensor(c_, kWorkspaceBytes);
    c_.gemm.set_workspace(workspace_->p(), kWorkspaceBytes);
  }
  TP y = make_tensor(c_, uint64_t(m) * n * kBf16);
  if (cfg_.mode == Mode::BF16) {
    MatRef A{x->p(), DType::BF16, kk, 0, false, nullptr};
    MatRef B{w.data->p(), DType::BF16, kk, 0, true, nullptr};
    Scope s(c_, Gemm::launch_name(A, B, DType::BF16));
    c_.kernel(Gemm::launch_name(A, B, DType::BF16));
    c_.gemm.run(m, n, kk, 1.f, A, B, 0.f, y->p(), DType::BF16, n, 0, 1, c_.stream);
    saved.x = x;
  } else {
    TP w8;  // FP8 weight, out x in (k contiguous)
    if (cfg_.mode == Mode::FP8) {
      Scope s(c_, "cast_weight_fp8");
      cast(w.data, w.numel(), k::Fp8::E4M3, w8, saved.wsc);
    } else {
      w8 = w.data;
      saved.wsc = w.scale;
    }
    {
      Scope s(c_, "transpose_weight_fp8");
      saved.wt8 = make_tensor(c_, uint64_t(w.numel()));
      c_.kernel("transpose_fp8");
      k::transpose_u8(w8->p(), saved.wt8->p(), n, kk, c_.stream);
    }
    TP x8;
    {
      Scope s(c_, "cast_input_fp8");
      cast(x, int64_t(m) * kk, k::Fp8::E4M3, x8, saved.xsc);
      saved.xt8 = make_tensor(c_, uint64_t(m) * kk);
      c_.kernel("transpose_fp8");
      k::transpose_u8(x8->p(), saved.xt8->p(), m, kk, c_.stream);
    }
    MatRef A{x8->p(), DType::E4M3, kk, 0, false, saved.xsc->as<float>()};
    MatRef B{w8->p(), DType::E4M3, kk, 0, true, saved.wsc->as<float>()};
    Scope s(c_, Gemm::launch_name(A, B, DType::BF16));
    c_.kernel(Gemm::launch_name(A, B, DType::BF16));
    c_.gemm.run(m, n, kk, 1.f, A, B, 0.f, y->p(), DType::BF16, n, 0, 1, c_.stream);
  }
  c_.kernel("add_bias");
  k::add_bias(y->p(), b.data->p(), m, n, c_.stream);
  return y;
}

TP Model::linear_bwd(Param& w, Param& b, const TP& dy, LinearSaved& saved) {
  const int m = cfg_.rows();
  const int n = int(w.rows), kk = int(w.cols);
  {
    Scope s(c_, "bias_grad");
    TP acc = make_tensor(c_, uint64_t(n) * sizeof(float));
    cuda_check(cudaMemsetAsync(acc->p(), 0, acc->bytes(), c_.stream), "memset");
    c_.kernel("column_sum");
    k::column_sum(dy->p(), acc->as<float>(), m, n, c_.stream);
    TP g = make_tensor(c_, uint64_t(n) * kBf16);
    c_.kernel("f32_to_bf16");
    k::f32_to_bf16(acc->as<float>(), g->p(), size_t(n), c_.stream);
    acc.reset();
    accumulate_grad(b, std::move(g));
  }
  TP dx = make_tensor(c_, uint64_t(m) * kk * kBf16);
  TP dw;
  if (cfg_.mode == Mode::BF16) {
    {
      Scope s(c_, "dgrad");
      MatRef A{dy->p(), DType::BF16, n, 0, false, nullptr};
      MatRef B{w.data->p(), DType::BF16, kk, 0, false, nullptr};
      c_.kernel(Gemm::launch_name(A, B, DType::BF16));
      c_.gemm.run(m, kk, n, 1.f, A, B, 0.f, dx->p(), DType::BF16, kk, 0, 1, c_.stream);
    }
    Scope s(c_, "wgrad");
    dw = make_tensor(c_, uint64_t(w.numel()) * kBf16);
    MatRef A{dy->p(), DType::BF16, n, 0, true, nullptr};
    MatRef B{saved.x->p(), DType::BF16, kk, 0, false, nullptr};
    c_.kernel(Gemm::launch_name(A, B, DType::BF16));
    c_.gemm.run(n, kk, m, 1.f, A, B, 0.f, dw->p(), DType::BF16, kk, 0, 1, c_.stream);
    saved.x.reset();
  } else {
    TP dy8, dysc, dy8t;
    {
      Scope s(c_, "cast_grad_output_fp8");
      cast(dy, int64_t(m) * n, k::Fp8::E5M2, dy8, dysc);
      dy8t = make_tensor(c_, uint64_t(m) * n);
      c_.kernel("transpose_fp8");
      k::transpose_u8(dy8->p(), dy8t->p(), m, n, c_.stream);
    }
    {
      Scope s(c_, "dgrad");
      MatRef A{dy8->p(), DType::E5M2, n, 0, false, dysc->as<float>()};
      MatRef B{saved.wt8->p(), DType::E4M3, n, 0, true, saved.wsc->as<float>()};
      c_.kernel(Gemm::launch_name(A, B, DType::BF16));
      c_.gemm.run(m, kk, n, 1.f, A, B, 0.f, dx->p(), DType::BF16, kk, 0, 1, c_.stream);
    }
    dy8.reset();
    saved.wt8.reset();
    saved.wsc.reset();
    Scope s(c_, "wgrad");
    dw = make_tensor(c_, uint64_t(w.numel()) * kBf16);
    MatRef A{dy8t->p(), DType::E5M2, m, 0, false, dysc->as<float>()};
    MatRef B{saved.xt8->p(), DType::E4M3, m, 0, true, saved.xsc->as<float>()};
    c_.kernel(Gemm::launch_name(A, B, DType::BF16));
    c_.gemm.run(n, kk, m, 1.f, A, B, 0.f, dw->p(), DType::BF16, kk, 0, 1, c_.stream);
    dy8t.reset();
    saved.xt8.reset();
    saved.xsc.reset();
  }
  accumulate_grad(w, std::move(dw));
  return dx;
}

TP Model::attention_fwd(const TP& qkv, TP& lse) {
  const int seq = cfg_.seq, B = cfg_.batch, H = cfg_.hidden(), d = cfg_.head_dim;
  const int heads = cfg_.heads;
  const uint64_t per_head = uint64_t(seq) * seq * sizeof(float);
  const int chunk = int(std::max<uint64_t>(1, std::min<uint64_t>(uint64_t(heads), cfg_.attn_chunk_bytes / per_head)));
  TP O = make_tensor(c_, uint64_t(cfg_.rows()) * H * kBf16);
  lse = make_tensor(c_, uint64_t(B) * heads * seq * sizeof(float));
  Scope s(c_, "scores (" + std::to_string(chunk) + " heads at a time)");
  TP S = make_tensor(c_, uint64_t(chunk) * per_head);
  TP P = make_tensor(c_, uint64_t(chunk) * seq * seq * kBf16);
  const float scale = 1.f / std::sqrt(float(d));
  const int64_t ld_qkv = int64_t(B) * 3 * H, ld_o = int64_t(B) * H, ss = int64_t(seq) * seq;
  for (int b = 0; b < B; ++b)
    for (int h0 = 0; h0 < heads; h0 += chunk) {
      const int nh = std::min(chunk, heads - h0);
      const int64_t q_off = (int64_t(b) * 3 * H + int64_t(h0) * d) * int64_t(kBf16);
      MatRef Q{qkv->bytes_at(uint64_t(q_off)), DType::BF16, ld_qkv, d, false, nullptr};
      MatRef K{qkv->bytes_at(uint64_t(q_off + int64_t(H) * 2)), DType::BF16, ld_qkv, d, true, nullptr};
      c_.kernel(Gemm::launch_name(Q, K, DType::F32));
      c_.gemm.run(seq, seq, d, scale, Q, K, 0.f, S->p(), DType::F32, seq, ss, nh, c_.stream);
      c_.kernel("softmax_causal_fwd");
      k::softmax_causal_fwd(S->as<float>(), P->p(), lse->as<float>() + (int64_t(b) * heads + h0) * seq,
                            nh, seq, seq, c_.stream);
      MatRef Pm{P->p(), DType::BF16, seq, ss, false, nullptr};
      MatRef V{qkv->bytes_at(uint64_t(q_off + int64_t(H) * 4)), DType::BF16, ld_qkv, d, false, nullptr};
      c_.kernel(Gemm::launch_name(Pm, V, DType::BF16));
      c_.gemm.run(seq, d, seq, 1.f, Pm, V, 0.f, O->bytes_at(uint64_t((int64_t(b) * H + int64_t(h0) * d) * 2)),
                  DType::BF16, ld_o, d, nh, c_.stream);
    }
  return O;
}

TP Model::attention_bwd(const TP& dO, const TP& qkv, const TP& O, const TP& lse) {
  const int seq = cfg_.seq, B = cfg_.batch, H = cfg_.hidden(), d = cfg_.head_dim;
  const int heads = cfg_.heads;
  const uint64_t per_head = uint64_t(seq) * seq * sizeof(float);
  const int chunk = int(std::max<uint64_t>(1, std::min<uint64_t>(uint64_t(heads), cfg_.attn_chunk_bytes / per_head)));
  TP dqkv = make_tensor(c_, uint64_t(cfg_.rows()) * 3 * H * kBf16);
  TP Dr = make_tensor(c_, uint64_t(B) * heads * seq * sizeof(float));
  c_.kernel("attn_rowdot");
  k::attn_rowdot(dO->p(), O->p(), Dr->as<float>(), seq, B, heads, d, c_.stream);
  Scope s(c_, "scores recomputed (" + std::to_string(chunk) + " heads at a time)");
  TP S = make_tensor(c_, uint64_t(chunk) * per_head);
  TP P = make_tensor(c_, uint64_t(chunk) * seq * seq * kBf16);
  const float scale = 1.f / std::sqrt(float(d));
  const int64_t ld_qkv = int64_t(B) * 3 * H, ld_o = int64_t(B) * H, ss = int64_t(seq) * seq;
  for (int b = 0; b < B; ++b)
    for (int h0 = 0; h0 < heads; h0 += chunk) {
      const int nh = std::min(chunk, heads - h0);
      const uint64_t q_off = uint64_t((int64_t(b) * 3 * H + int64_t(h0) * d) * 2);
      const uint64_t k_off = q_off + uint64_t(H) * 2, v_off = q_off + uint64_t(H) * 4;
      const uint64_t o_off = uint64_t((int64_t(b) * H + int64_t(h0) * d) * 2);
      const int64_t row0 = (int64_t(b) * heads + h0) * seq;
      MatRef Q{qkv->bytes_at(q_off), DType::BF16, ld_qkv, d, false, nullptr};
      MatRef Kt{qkv->bytes_at(k_off), DType::BF16, ld_qkv, d, true, nullptr};
      c_.kernel(Gemm::launch_name(Q, Kt, DType::F32));
      c_.gemm.run(seq, seq, d, scale, Q, Kt, 0.f, S->p(), DType::F32, seq, ss, nh, c_.stream);
      c_.kernel("softmax_causal_recompute");
      k::softmax_causal_recompute(S->as<float>(), lse->as<float>() + row0, P->p(), nh, seq, seq, c_.stream);
      // dV = P^T dO
      MatRef Pt{P->p(), DType::BF16, seq, ss, true, nullptr};
      MatRef dOm{dO->bytes_at(o_off), DType::BF16, ld_o, d, false, nullptr};
      c_.kernel(Gemm::launch_name(Pt, dOm, DType::BF16));
      c_.gemm.run(seq, d, seq, 1.f, Pt, dOm, 0.f, dqkv->bytes_at(v_off), DType::BF16, ld_qkv, d, nh, c_.stream);
      // dP = dO V^T (into S)
      MatRef Vt{qkv->bytes_at(v_off), DType::BF16, ld_qkv, d, true, nullptr};
      c_.kernel(Gemm::launch_name(dOm, Vt, DType::F32));
      c_.gemm.run(seq, seq, d, 1.f, dOm, Vt, 0.f, S->p(), DType::F32, seq, ss, nh, c_.stream);
      c_.kernel("softmax_causal_bwd");
      k::softmax_causal_bwd(S->as<float>(), Dr->as<float>() + row0, P->p(), nh, seq, seq, c_.stream);
      // dQ = scale dS K, dK = scale dS^T Q
      MatRef dS{P->p(), DType::BF16, seq, ss, false, nullptr};
      MatRef Km{qkv->bytes_at(k_off), DType::BF16, ld_qkv, d, false, nullptr};
      c_.kernel(Gemm::launch_name(dS, Km, DType::BF16));
      c_.gemm.run(seq, d, seq, scale, dS, Km, 0.f, dqkv->bytes_at(q_off), DType::BF16, ld_qkv, d, nh, c_.stream);
      MatRef dSt{P->p(), DType::BF16, seq, ss, true, nullptr};
      c_.kernel(Gemm::launch_name(dSt, Q, DType::BF16));
      c_.gemm.run(seq, d, seq, scale, dSt, Q, 0.f, dqkv->bytes_at(k_off), DType::BF16, ld_qkv, d, nh, c_.stream);
    }
  return dqkv;
}

TP Model::layer_fwd(Layer& L, const TP& x, LayerSaved& s) {
  const int m = cfg_.rows(), h = cfg_.hidden();
  const uint64_t act = uint64_t(m) * h * kBf16;
  s.x = x;
  TP ln1;
  {
    Scope sc(c_, "ln1");
    ln1 = make_tensor(c_, act);
    s.mean1 = make_tensor(c_, uint64_t(m) * sizeof(float));
    s.rstd1 = make_tensor(c_, uint64_t(m) * sizeof(float));
    c_.kernel("layernorm_fwd");
    k::layernorm_fwd(x->p(), L.ln1_w.data->p(), L.ln1_b.data->p(), ln1->p(), s.mean1->as<float>(),
                     s.rstd1->as<float>(), m, h, c_.stream);
  }
  {
    Scope sc(c_, "qkv");
    s.qkv_out = linear_fwd(L.qkv_w, L.qkv_b, ln1, s.qkv);
  }
  ln1.reset();
  {
    Scope sc(c_, "attention");
    s.attn_out = attention_fwd(s.qkv_out, s.lse);
  }
  TP proj;
  {
    Scope sc(c_, "proj");
    proj = linear_fwd(L.proj_w, L.proj_b, s.attn_out, s.proj);
  }
  {
    Scope sc(c_, "residual");
    s.h1 = make_tensor(c_, act);
    c_.kernel("add");
    k::add(x->p(), proj->p(), s.h1->p(), size_t(m) * h, c_.stream);
  }
  proj.reset();
  TP ln2;
  {
    Scope sc(c_, "ln2");
    ln2 = make_tensor(c_, act);
    s.mean2 = make_tensor(c_, uint64_t(m) * sizeof(float));
    s.rstd2 = make_tensor(c_, uint64_t(m) * sizeof(float));
    c_.kernel("layernorm_fwd");
    k::layernorm_fwd(s.h1->p(), L.ln2_w.data->p(), L.ln2_b.data->p(), ln2->p(), s.mean2->as<float>(),
                     s.rstd2->as<float>(), m, h, c_.stream);
  }
  {
    Scope sc(c_, "fc1");
    s.fc1_out = linear_fwd(L.fc1_w, L.fc1_b, ln2, s.fc1);
  }
  ln2.reset();
  TP g;
  {
    Scope sc(c_, "gelu");
    g = make_tensor(c_, act * 3);
    c_.kernel("gelu_fwd");
    k::gelu_fwd(s.fc1_out->p(), g->p(), size_t(m) * h * 3, c_.stream);
  }
  TP fc2;
  {
    Scope sc(c_, "fc2");
    fc2 = linear_fwd(L.fc2_w, L.fc2_b, g, s.fc2);
  }
  g.reset();
  Scope sc(c_, "residual");
  TP y = make_tensor(c_, act);
  c_.kernel("add");
  k::add(s.h1->p(), fc2->p(), y->p(), size_t(m) * h, c_.stream);
  return y;
}

TP Model::layer_bwd(Layer& L, const TP& dy, LayerSaved& s) {
  const int m = cfg_.rows(), h = cfg_.hidden();
  const uint64_t act = uint64_t(m) * h * kBf16;
  auto ln_bwd = [&](Param& w, Param& b, const TP& dout, const TP& x, const TP& mean, const TP& rstd,
                    const TP& dres) {
    TP acc = make_tensor(c_, uint64_t(2) * h * sizeof(float));
    cuda_check(cudaMemsetAsync(acc->p(), 0, acc->bytes(), c_.stream), "memset");
    TP dx = make_tensor(c_, act);
    c_.kernel("layernorm_bwd");
    k::layernorm_bwd(dout->p(), x->p(), mean->as<float>(), rstd->as<float>(), w.data->p(), dres->p(),
                     dx->p(), acc->as<float>(), acc->as<float>() + h, m, h, c_.stream);
    TP gw = make_tensor(c_, uint64_t(h) * kBf16), gb = make_tensor(c_, uint64_t(h) * kBf16);
    c_.kernel("f32_to_bf16");
    k::f32_to_bf16(acc->as<float>(), gw->p(), size_t(h), c_.stream);
    c_.kernel("f32_to_bf16");
    k::f32_to_bf16(acc->as<float>() + h, gb->p(), size_t(h), c_.stream);
    acc.reset();
    accumulate_grad(w, std::move(gw));
    accumulate_grad(b, std::move(gb));
    return dx;
  };
  TP dg;
  {
    Scope sc(c_, "fc2");
    dg = linear_bwd(L.fc2_w, L.fc2_b, dy, s.fc2);
  }
  TP dfc1;
  {
    Scope sc(c_, "gelu");
    dfc1 = make_tensor(c_, act * 3);
    c_.kernel("gelu_bwd");
    k::gelu_bwd(dg->p(), s.fc1_out->p(), dfc1->p(), size_t(m) * h * 3, c_.stream);
    dg.reset();
    s.fc1_out.reset();
  }
  TP dln2;
  {
    Scope sc(c_, "fc1");
    dln2 = linear_bwd(L.fc1_w, L.fc1_b, dfc1, s.fc1);
    dfc1.reset();
  }
  TP dh1;
  {
    Scope sc(c_, "ln2");
    dh1 = ln_bwd(L.ln2_w, L.ln2_b, dln2, s.h1, s.mean2, s.rstd2, dy);
    dln2.reset();
    s.h1.reset();
    s.mean2.reset();
    s.rstd2.reset();
  }
  TP dattn;
  {
    Scope sc(c_, "proj");
    dattn = linear_bwd(L.proj_w, L.proj_b, dh1, s.proj);
  }
  TP dqkv;
  {
    Scope sc(c_, "attention");
    dqkv = attention_bwd(dattn, s.qkv_out, s.attn_out, s.lse);
    dattn.reset();
    s.attn_out.reset();
    s.lse.reset();
    s.qkv_out.reset();
  }
  TP dln1;
  {
    Scope sc(c_, "qkv");
    dln1 = linear_bwd(L.qkv_w, L.qkv_b, dqkv, s.qkv);
    dqkv.reset();
  }
  Scope sc(c_, "ln1");
  TP dx = ln_bwd(L.ln1_w, L.ln1_b, dln1, s.x, s.mean1, s.rstd1, dh1);
  s.x.reset();
  s.mean1.reset();
  s.rstd1.reset();
  return dx;
}

void Model::adam_single(Param& p, float step_size, float bc2_sqrt) {
  const int64_t n = p.numel();
  const uint64_t bytes = uint64_t(n) * kBf16;
  TP wbf;  // the bf16 weight the update applies to
  if (p.fp8) {
    Scope s(c_, "dequantize");
    wbf = make_tensor(c_, bytes);
    c_.kernel("dequant_fp8");
    k::dequant_fp8(p.data->p(), p.scale->as<float>(), k::Fp8::E4M3, wbf->p(), size_t(n), c_.stream);
  } else {
    wbf = p.data;
  }
  k::TensorRef t{};
  t.n = n;
  t.out = p.exp_avg->p(); t.a = p.exp_avg->p(); t.b = p.grad->p();
  c_.kernel("lerp_");
  k::adam_stage(k::AdamOp::Lerp, &t, 1, 1.f - cfg_.beta1, c_.stream);
  t.out = p.exp_avg_sq->p(); t.a = p.exp_avg_sq->p();
  c_.kernel("mul_");
  k::adam_stage(k::AdamOp::Mul, &t, 1, cfg_.beta2, c_.stream);
  c_.kernel("addcmul_");
  k::adam_stage(k::AdamOp::AddcmulSq, &t, 1, 1.f - cfg_.beta2, c_.stream);
  // denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps): two
  // temporaries, the first freed when the division is done.
  TP denom;
  {
    Scope s(c_, "denom");
    TP sq = make_tensor(c_, bytes);
    t.out = sq->p(); t.a = p.exp_avg_sq->p();
    c_.kernel("sqrt");
    k::adam_stage(k::AdamOp::Sqrt, &t, 1, 0.f, c_.stream);
    denom = make_tensor(c_, bytes);
    t.out = denom->p(); t.a = sq->p();
    c_.kernel("div");
    k::adam_stage(k::AdamOp::DivScalar, &t, 1, bc2_sqrt, c_.stream);
  }
  t.out = denom->p(); t.a = denom->p();
  c_.kernel("add_");
  k::adam_stage(k::AdamOp::AddScalar, &t, 1, cfg_.eps, c_.stream);
  t.out = wbf->p(); t.a = wbf->p(); t.b = p.exp_avg->p(); t.c = denom->p();
  c_.kernel("addcdiv_");
  k::adam_stage(k::AdamOp::Addcdiv, &t, 1, -step_size, c_.stream);
  denom.reset();
  if (p.fp8) {
    // Requantize into a new FP8 tensor that replaces the parameter.
    Scope s(c_, "requantize");
    TP q, sc;
    cast(wbf, n, k::Fp8::E4M3, q, sc);
    p.data = std::move(q);
    p.scale = std::move(sc);
  }
}

void Model::optimizer_step() {
  Scope so(c_, "Optimizer.step");
  Scope sa(c_, "adam");
  std::vector<Param*> ps = params();
  if (step_ == 0) {
    Scope s(c_, "init state");
    for (Param* p : ps) {
      Scope sp(c_, p->name);
      const uint64_t bytes = uint64_t(p->numel()) * kBf16;
      p->exp_avg = make_tensor(c_, bytes);
      cuda_check(cudaMemsetAsync(p->exp_avg->p(), 0, bytes, c_.stream), "memset");
      p->exp_avg_sq = make_tensor(c_, bytes);
      cuda_check(cudaMemsetAsync(p->exp_avg_sq->p(), 0, bytes, c_.stream), "memset");
    }
  }
  ++step_;
  const double bc1 = 1.0 - std::pow(double(cfg_.beta1), step_);
  const double bc2 = 1.0 - std::pow(double(cfg_.beta2), step_);
  const float step_size = float(cfg_.lr / bc1);
  const float bc2_sqrt = float(std::sqrt(bc2));

  std::vector<Param*> loop, multi;
  for (Param* p : ps) {
    if (p->fp8 || cfg_.optimizer == OptimizerKind::Loop) loop.push_back(p);
    else multi.push_back(p);
  }
  if (!multi.empty()) {
    // torch.optim.adam._multi_tensor_adam: each stage over all tensors.
    Scope s(c_, "_multi_tensor_adam");
    std::vector<k::TensorRef> t(multi.size());
    auto set = [&](auto fn) {
      for (size_t i = 0; i < multi.size(); ++i) {
        t[i] = k::TensorRef{};
        t[i].n = multi[i]->numel();
        fn(*multi[i], t[i]);
      }
    };
    const int nt = int(t.size());
    set([](Param& p, k::TensorRef& r) { r.out = p.exp_avg->p(); r.a = p.exp_avg->p(); r.b = p.grad->p(); });
    c_.kernel("_foreach_lerp_");
    k::adam_stage(k::AdamOp::Lerp, t.data(), nt, 1.f - cfg_.beta1, c_.stream);
    set([](Param& p, k::TensorRef& r) { r.out = p.exp_avg_sq->p(); r.a = p.exp_avg_sq->p(); r.b = p.grad->p(); });
    c_.kernel("_foreach_mul_");
    k::adam_stage(k::AdamOp::Mul, t.data(), nt, cfg_.beta2, c_.stream);
    c_.kernel("_foreach_addcmul_");
    k::adam_stage(k::AdamOp::AddcmulSq, t.data(), nt, 1.f - cfg_.beta2, c_.stream);
    std::vector<TP> sq(multi.size());
    {
      Scope s2(c_, "_foreach_sqrt");
      for (size_t i = 0; i < multi.size(); ++i) sq[i] = make_tensor(c_, uint64_t(multi[i]->numel()) * kBf16);
      set([](Param& p, k::TensorRef& r) { r.a = p.exp_avg_sq->p(); });
      for (size_t i = 0; i < multi.size(); ++i) t[i].out = sq[i]->p();
      c_.kernel("_foreach_sqrt");
      k::adam_stage(k::AdamOp::Sqrt, t.data(), nt, 0.f, c_.stream);
    }
    for (size_t i = 0; i < multi.size(); ++i) t[i].a = t[i].out;
    c_.kernel("_foreach_div_");
    k::adam_stage(k::AdamOp::DivScalar, t.data(), nt, bc2_sqrt, c_.stream);
    c_.kernel("_foreach_add_");
    k::adam_stage(k::AdamOp::AddScalar, t.data(), nt, cfg_.eps, c_.stream);
    for (size_t i = 0; i < multi.size(); ++i) {
      t[i].c = sq[i]->p();
      t[i].out = multi[i]->data->p();
      t[i].a = multi[i]->data->p();
      t[i].b = multi[i]->exp_avg->p();
    }
    c_.kernel("_foreach_addcdiv_");
    k::adam_stage(k::AdamOp::Addcdiv, t.data(), nt, -step_size, c_.stream);
    sq.clear();
  }
  if (!loop.empty()) {
    Scope s(c_, "_single_tensor_adam");
    for (Param* p : loop) {
      Scope sp(c_, p->name);
      adam_single(*p, step_size, bc2_sqrt);
    }
  }
  c_.check_launch("optimizer");
}

IterStats Model::train_step(int iter) {
  const int m = cfg_.rows(), h = cfg_.hidden();
  const uint64_t act = uint64_t(m) * h * kBf16;
  IterStats st;
  st.iter = iter;
  auto t0 = std::chrono::steady_clock::now();
  Scope si(c_, "iter " + std::to_string(iter));
  {
    // x = torch.rand(seq, batch, h): the old input goes when the name is rebound.
    Scope s(c_, "input");
    TP x = make_tensor(c_, act);
    c_.kernel("fill_uniform");
    k::fill_uniform_bf16(x->p(), size_t(m) * h, cfg_.seed * 7919 + uint64_t(iter), 0.f, 1.f, c_.stream);
    x_ = std::move(x);
  }
  std::vector<LayerSaved> saved(layers_.size());
  TP loss;
  {
    Scope s(c_, "forward");
    TP cur = x_;
    for (size_t li = 0; li < layers_.size(); ++li) {
      Scope sl(c_, "layer " + std::to_string(li));
      cur = layer_fwd(layers_[li], cur, saved[li]);
    }
    y_ = std::move(cur);  // y = model(x): the previous y goes now
    Scope sl(c_, "loss = y.sum()");
    loss = make_tensor(c_, sizeof(float));
    cuda_check(cudaMemsetAsync(loss->p(), 0, sizeof(float), c_.stream), "memset");
    c_.kernel("sum");
    k::sum(y_->p(), size_t(m) * h, loss->as<float>(), c_.stream);
    c_.check_launch("forward");
  }
  if (on_phase) on_phase("iter " + std::to_string(iter) + " after forward");
  {
    Scope s(c_, "backward");
    TP dy;
    {
      Scope sl(c_, "loss.backward()");
      dy = make_tensor(c_, act);
      c_.kernel("fill_const");
      k::fill_const_bf16(dy->p(), size_t(m) * h, 1.f, c_.stream);
    }
    for (size_t li = layers_.size(); li-- > 0;) {
      Scope sl(c_, "layer " + std::to_string(li));
      dy = layer_bwd(layers_[li], dy, saved[li]);
    }
    c_.check_launch("backward");
  }
  if (on_phase) on_phase("iter " + std::to_string(iter) + " after backward");
  optimizer_step();
  if (on_phase) on_phase("iter " + std::to_string(iter) + " after optimizer step");
  cuda_check(cudaMemcpyAsync(&st.loss, loss->p(), sizeof(float), cudaMemcpyDeviceToHost, c_.stream), "loss");
  cuda_check(cudaStreamSynchronize(c_.stream), "synchronize");
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  st.allocated_after = c_.alloc.stats().allocated;
  st.peak_so_far = c_.alloc.stats().peak_allocated;
  return st;
}

}  // namespace snapcapture
