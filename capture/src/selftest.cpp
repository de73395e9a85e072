// `snapcapture --selftest`: every kernel and matrix product of the workload
// against a CPU reference on small random sizes, then a few training steps
// of each mode at a small size (finite loss that goes down).
#include "selftest.hpp"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "model.hpp"

namespace snapcapture {
namespace {

uint16_t f2bf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return uint16_t(u >> 16);
}
float bf2f(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
float rbf(float f) { return bf2f(f2bf(f)); }

struct Host {
  std::vector<float> v;  // values already rounded to bf16
};

std::vector<float> rand_bf(size_t n, std::mt19937& g, float lo = -1.f, float hi = 1.f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = rbf(d(g));
  return v;
}

// Relative Frobenius error.
double rel_err(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double d = double(got[i]) - want[i];
    num += d * d;
    den += double(want[i]) * want[i];
  }
  if (!std::isfinite(num)) return INFINITY;
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace

struct SelfTest {
  Ctx& c;
  std::ostream& out;
  int failures = 0;
  std::mt19937 g{42};

  TP up_bf(const std::vector<float>& v) {
    TP t = make_tensor(c, v.size() * 2);
    std::vector<uint16_t> b(v.size());
    for (size_t i = 0; i < v.size(); ++i) b[i] = f2bf(v[i]);
    cuda_check(cudaMemcpy(t->p(), b.data(), b.size() * 2, cudaMemcpyHostToDevice), "upload");
    return t;
  }
  TP up_f32(const std::vector<float>& v) {
    TP t = make_tensor(c, v.size() * 4);
    cuda_check(cudaMemcpy(t->p(), v.data(), v.size() * 4, cudaMemcpyHostToDevice), "upload");
    return t;
  }
  std::vector<float> down_bf(const TP& t, size_t n) {
    std::vector<uint16_t> b(n);
    cuda_check(cudaMemcpy(b.data(), t->p(), n * 2, cudaMemcpyDeviceToHost), "download");
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = bf2f(b[i]);
    return v;
  }
  std::vector<float> down_f32(const TP& t, size_t n, size_t off = 0) {
    std::vector<float> v(n);
    cuda_check(cudaMemcpy(v.data(), t->as<float>() + off, n * 4, cudaMemcpyDeviceToHost), "download");
    return v;
  }
  void expect(const std::string& what, double err, double bound) {
    bool ok = err <= bound;
    if (!ok) ++failures;
    out << (ok ? "ok    " : "FAIL  ") << what << ": relative error " << err << " (bound " << bound << ")\n";
  }

  // C = op(A) op(B) on the CPU, row-major.
  static std::vector<float> ref_gemm(int m, int n, int k, const std::vector<float>& A, bool ta,
                                     const std::vector<float>& B, bool tb) {
    std::vector<float> C(size_t(m) * n);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double s = 0;
        for (int p = 0; p < k; ++p) {
          float a = ta ? A[size_t(p) * m + i] : A[size_t(i) * k + p];
          float b = tb ? B[size_t(j) * k + p] : B[size_t(p) * n + j];
          s += double(a) * b;
        }
        C[size_t(i) * n + j] = float(s);
      }
    return C;
  }

  void gemms() {
    const int m = 96, n = 80, k = 64;
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        auto A = rand_bf(size_t(m) * k, g), B = rand_bf(size_t(k) * n, g);
        TP dA = up_bf(A), dB = up_bf(B), dC = make_tensor(c, size_t(m) * n * 2);
        MatRef a{dA->p(), DType::BF16, ta ? m : k, 0, bool(ta), nullptr};
        MatRef b{dB->p(), DType::BF16, tb ? k : n, 0, bool(tb), nullptr};
        c.gemm.run(m, n, k, 1.f, a, b, 0.f, dC->p(), DType::BF16, n, 0, 1, c.stream);
        expect(std::string("bf16 matmul op(A)=") + (ta ? "A^T" : "A") + " op(B)=" + (tb ? "B^T" : "B"),
               rel_err(down_bf(dC, size_t(m) * n), ref_gemm(m, n, k, A, ta, B, tb)), 1e-2);
      }
    // FP8: quantize A (m x k) and B (n x k) on the device, compare with the
    // exact product of the unquantized bf16 inputs.
    const k::Fp8 kinds[3][2] = {{k::Fp8::E4M3, k::Fp8::E4M3}, {k::Fp8::E5M2, k::Fp8::E4M3}, {k::Fp8::E4M3, k::Fp8::E5M2}};
    for (auto& kd : kinds) {
      auto A = rand_bf(size_t(m) * k, g), B = rand_bf(size_t(n) * k, g);
      TP dA = up_bf(A), dB = up_bf(B), qa, sa, qb, sb;
      Model* none = nullptr;
      (void)none;
      quantize(dA, A.size(), kd[0], qa, sa);
      quantize(dB, B.size(), kd[1], qb, sb);
      TP dC = make_tensor(c, size_t(m) * n * 2);
      DType ta = kd[0] == k::Fp8::E4M3 ? DType::E4M3 : DType::E5M2;
      DType tb = kd[1] == k::Fp8::E4M3 ? DType::E4M3 : DType::E5M2;
      MatRef a{qa->p(), ta, k, 0, false, sa->as<float>()};
      MatRef b{qb->p(), tb, k, 0, true, sb->as<float>()};
      c.gemm.run(m, n, k, 1.f, a, b, 0.f, dC->p(), DType::BF16, n, 0, 1, c.stream);
      bool e5 = kd[0] == k::Fp8::E5M2 || kd[1] == k::Fp8::E5M2;
      // E5M2 keeps 2 mantissa bits: about 5% error per element by itself.
      expect(Gemm::launch_name(a, b, DType::BF16) + " vs exact", rel_err(down_bf(dC, size_t(m) * n), ref_gemm(m, n, k, A, false, B, true)),
             e5 ? 8e-2 : 5e-2);
    }
  }

  void quantize(const TP& x, size_t n, k::Fp8 f, TP& q, TP& sc) {
    TP amax = make_tensor(c, 4);
    cudaMemset(amax->p(), 0, 4);
    k::amax_bf16(x->p(), n, amax->as<float>(), c.stream);
    sc = make_tensor(c, 8);
    k::compute_scale(amax->as<float>(), f, sc->as<float>(), c.stream);
    q = make_tensor(c, n);
    k::cast_fp8(x->p(), sc->as<float>(), q->p(), n, f, c.stream);
  }

  void fp8_casts() {
    const int rows = 48, cols = 80;
    auto X = rand_bf(size_t(rows) * cols, g, -3.f, 3.f);
    float amax = 0;
    for (float v : X) amax = std::max(amax, std::fabs(v));
    TP dX = up_bf(X), q, sc;
    quantize(dX, X.size(), k::Fp8::E4M3, q, sc);
    auto s = down_f32(sc, 2);
    expect("amax/scale (448 / amax)", std::fabs(s[1] - 448.f / amax) / (448.f / amax), 1e-6);
    TP back = make_tensor(c, X.size() * 2);
    k::dequant_fp8(q->p(), sc->as<float>(), k::Fp8::E4M3, back->p(), X.size(), c.stream);
    expect("e4m3 cast round trip", rel_err(down_bf(back, X.size()), X), 4e-2);
    TP qt = make_tensor(c, X.size());
    k::transpose_u8(q->p(), qt->p(), rows, cols, c.stream);
    std::vector<uint8_t> a(X.size()), b(X.size());
    cudaMemcpy(a.data(), q->p(), a.size(), cudaMemcpyDeviceToHost);
    cudaMemcpy(b.data(), qt->p(), b.size(), cudaMemcpyDeviceToHost);
    size_t bad = 0;
    for (int r = 0; r < rows; ++r)
      for (int cc = 0; cc < cols; ++cc) bad += a[size_t(r) * cols + cc] != b[size_t(cc) * rows + r];
    expect("fp8 transpose (mismatching bytes)", double(bad), 0);
  }

  void layernorm_gelu() {
    const int rows = 64, cols = 512;
    auto X = rand_bf(size_t(rows) * cols, g, -2.f, 2.f), G = rand_bf(size_t(cols), g, 0.5f, 1.5f),
         Bv = rand_bf(size_t(cols), g), DY = rand_bf(size_t(rows) * cols, g), DR = rand_bf(size_t(rows) * cols, g);
    std::vector<float> Y(X.size()), DX(X.size()), DG(size_t(cols), 0.f), DB(size_t(cols), 0.f);
    for (int r = 0; r < rows; ++r) {
      double mu = 0, var = 0;
      for (int j = 0; j < cols; ++j) mu += X[size_t(r) * cols + j];
      mu /= cols;
      for (int j = 0; j < cols; ++j) var += std::pow(X[size_t(r) * cols + j] - mu, 2);
      double rs = 1.0 / std::sqrt(var / cols + 1e-5);
      double m1 = 0, m2 = 0;
      for (int j = 0; j < cols; ++j) {
        size_t i = size_t(r) * cols + j;
        double xh = (X[i] - mu) * rs;
        Y[i] = float(xh * G[size_t(j)] + Bv[size_t(j)]);
        m1 += DY[i] * G[size_t(j)];
        m2 += DY[i] * G[size_t(j)] * xh;
        DG[size_t(j)] += float(DY[i] * xh);
        DB[size_t(j)] += DY[i];
      }
      m1 /= cols;
      m2 /= cols;
      for (int j = 0; j < cols; ++j) {
        size_t i = size_t(r) * cols + j;
        double xh = (X[i] - mu) * rs;
        DX[i] = float(rs * (DY[i] * G[size_t(j)] - m1 - xh * m2) + DR[i]);
      }
    }
    TP dX = up_bf(X), dG = up_bf(G), dB = up_bf(Bv), dY = make_tensor(c, X.size() * 2);
    TP mean = make_tensor(c, rows * 4), rstd = make_tensor(c, rows * 4);
    k::layernorm_fwd(dX->p(), dG->p(), dB->p(), dY->p(), mean->as<float>(), rstd->as<float>(), rows, cols, c.stream);
    expect("layernorm forward", rel_err(down_bf(dY, X.size()), Y), 1e-2);
    TP ddy = up_bf(DY), ddr = up_bf(DR), ddx = make_tensor(c, X.size() * 2);
    TP acc = up_f32(std::vector<float>(size_t(2) * cols, 0.f));
    k::layernorm_bwd(ddy->p(), dX->p(), mean->as<float>(), rstd->as<float>(), dG->p(), ddr->p(), ddx->p(),
                     acc->as<float>(), acc->as<float>() + cols, rows, cols, c.stream);
    expect("layernorm backward dx (+ residual)", rel_err(down_bf(ddx, X.size()), DX), 1e-2);
    expect("layernorm backward dgamma", rel_err(down_f32(acc, size_t(cols)), DG), 1e-3);
    expect("layernorm backward dbeta", rel_err(down_f32(acc, size_t(cols), size_t(cols)), DB), 1e-3);

    std::vector<float> GY(X.size()), GDX(X.size());
    for (size_t i = 0; i < X.size(); ++i) {
      double x = X[i], u = 0.7978845608028654 * (x + 0.044715 * x * x * x), t = std::tanh(u);
      GY[i] = float(0.5 * x * (1 + t));
      double du = 0.7978845608028654 * (1 + 3 * 0.044715 * x * x);
      GDX[i] = float(DY[i] * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du));
    }
    TP gy = make_tensor(c, X.size() * 2), gdx = make_tensor(c, X.size() * 2);
    k::gelu_fwd(dX->p(), gy->p(), X.size(), c.stream);
    k::gelu_bwd(ddy->p(), dX->p(), gdx->p(), X.size(), c.stream);
    expect("gelu forward", rel_err(down_bf(gy, X.size()), GY), 1e-2);
    expect("gelu backward", rel_err(down_bf(gdx, X.size()), GDX), 1e-2);
  }

  void attention() {
    Config cfg;
    cfg.layers = 0;
    cfg.heads = 4;
    cfg.head_dim = 64;
    cfg.seq = 128;
    cfg.batch = 2;
    cfg.attn_chunk_bytes = uint64_t(2) * 128 * 128 * 4;  // 2 heads at a time: the chunking is exercised
    Model model(c, cfg);
    const int S = cfg.seq, B = cfg.batch, NH = cfg.heads, D = cfg.head_dim, H = NH * D;
    auto QKV = rand_bf(size_t(S) * B * 3 * H, g), DO = rand_bf(size_t(S) * B * H, g);
    TP qkv = up_bf(QKV), dO = up_bf(DO), lse;
    TP O = model.attention_fwd(qkv, lse);
    TP dqkv = model.attention_bwd(dO, qkv, O, lse);
    std::vector<float> Oref(size_t(S) * B * H), dref(QKV.size(), 0.f);
    const double scale = 1.0 / std::sqrt(double(D));
    auto at = [&](int i, int b, int which, int h, int j) { return size_t(i * B + b) * 3 * H + size_t(which) * H + size_t(h) * D + j; };
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < NH; ++h) {
        std::vector<double> P(size_t(S) * S, 0.0), dP(size_t(S) * S, 0.0);
        for (int i = 0; i < S; ++i) {
          double mx = -1e300;
          for (int j = 0; j <= i; ++j) {
            double s = 0;
            for (int t = 0; t < D; ++t) s += double(QKV[at(i, b, 0, h, t)]) * QKV[at(j, b, 1, h, t)];
            P[size_t(i) * S + j] = s * scale;
            mx = std::max(mx, s * scale);
          }
          double sum = 0;
          for (int j = 0; j <= i; ++j) sum += std::exp(P[size_t(i) * S + j] - mx);
          for (int j = 0; j <= i; ++j) P[size_t(i) * S + j] = std::exp(P[size_t(i) * S + j] - mx) / sum;
          for (int t = 0; t < D; ++t) {
            double o = 0;
            for (int j = 0; j <= i; ++j) o += P[size_t(i) * S + j] * QKV[at(j, b, 2, h, t)];
            Oref[size_t(i * B + b) * H + size_t(h) * D + t] = float(o);
          }
        }
        auto dOat = [&](int i, int t) { return double(DO[size_t(i * B + b) * H + size_t(h) * D + t]); };
        for (int i = 0; i < S; ++i) {
          double Di = 0;
          for (int j = 0; j <= i; ++j) {
            double s = 0;
            for (int t = 0; t < D; ++t) s += dOat(i, t) * QKV[at(j, b, 2, h, t)];
            dP[size_t(i) * S + j] = s;
            Di += P[size_t(i) * S + j] * s;
          }
          for (int j = 0; j <= i; ++j) {
            double ds = P[size_t(i) * S + j] * (dP[size_t(i) * S + j] - Di) * scale;
            for (int t = 0; t < D; ++t) {
              dref[at(i, b, 0, h, t)] += float(ds * QKV[at(j, b, 1, h, t)]);
              dref[at(j, b, 1, h, t)] += float(ds * QKV[at(i, b, 0, h, t)]);
              dref[at(j, b, 2, h, t)] += float(P[size_t(i) * S + j] * dOat(i, t));
            }
          }
        }
      }
    expect("attention forward (causal, 2 heads per chunk)", rel_err(down_bf(O, Oref.size()), Oref), 2e-2);
    expect("attention backward dQ dK dV (recomputed scores)", rel_err(down_bf(dqkv, dref.size()), dref), 3e-2);
  }

  void adam() {
    const size_t n = 5000;
    auto P0 = rand_bf(n, g), G0 = rand_bf(n, g), M0 = rand_bf(n, g, -0.1f, 0.1f), V0 = rand_bf(n, g, 0.f, 0.01f);
    const float lr = 1e-2f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    const int step = 3;
    double bc1 = 1 - std::pow(b1, step), bc2 = 1 - std::pow(b2, step);
    std::vector<float> Pr(n), Mr(n), Vr(n);
    for (size_t i = 0; i < n; ++i) {
      double m = M0[i] + (1 - b1) * (G0[i] - M0[i]);
      double v = V0[i] * b2 + (1 - b2) * G0[i] * G0[i];
      Mr[i] = float(m);
      Vr[i] = float(v);
      Pr[i] = float(P0[i] - (lr / bc1) * m / (std::sqrt(v) / std::sqrt(bc2) + eps));
    }
    // The same stages as Model::optimizer_step, on two tensors at once.
    TP p = up_bf(P0), gr = up_bf(G0), m = up_bf(M0), v = up_bf(V0), t = make_tensor(c, n * 2);
    const int64_t h = int64_t(n / 2);
    auto list = [&](TP out, TP a, TP b, TP cc) {
      std::vector<k::TensorRef> r(2);
      for (int i = 0; i < 2; ++i) {
        int64_t off = i * h * 2;
        r[size_t(i)] = k::TensorRef{out->bytes_at(uint64_t(off)), a->bytes_at(uint64_t(off)),
                                    b ? b->bytes_at(uint64_t(off)) : nullptr, cc ? cc->bytes_at(uint64_t(off)) : nullptr,
                                    i == 0 ? h : int64_t(n) - h};
      }
      return r;
    };
    auto r = list(m, m, gr, nullptr);
    k::adam_stage(k::AdamOp::Lerp, r.data(), 2, 1 - b1, c.stream);
    r = list(v, v, gr, nullptr);
    k::adam_stage(k::AdamOp::Mul, r.data(), 2, b2, c.stream);
    k::adam_stage(k::AdamOp::AddcmulSq, r.data(), 2, 1 - b2, c.stream);
    r = list(t, v, nullptr, nullptr);
    k::adam_stage(k::AdamOp::Sqrt, r.data(), 2, 0, c.stream);
    r = list(t, t, nullptr, nullptr);
    k::adam_stage(k::AdamOp::DivScalar, r.data(), 2, float(std::sqrt(bc2)), c.stream);
    k::adam_stage(k::AdamOp::AddScalar, r.data(), 2, eps, c.stream);
    r = list(p, p, m, t);
    k::adam_stage(k::AdamOp::Addcdiv, r.data(), 2, -float(lr / bc1), c.stream);
    expect("adam exp_avg", rel_err(down_bf(m, n), Mr), 1e-2);
    expect("adam exp_avg_sq", rel_err(down_bf(v, n), Vr), 1e-2);
    expect("adam parameter", rel_err(down_bf(p, n), Pr), 1e-2);
  }
};

int run_selftest(Ctx& c, std::ostream& out) {
  SelfTest t{c, out};
  auto guarded = [&](const char* name, auto fn) {
    try {
      fn();
      cuda_check(cudaDeviceSynchronize(), name);
    } catch (const std::exception& e) {
      ++t.failures;
      out << "FAIL  " << name << ": " << e.what() << "\n";
    }
    out.flush();
  };
  guarded("matmuls", [&] { t.gemms(); });
  guarded("fp8 casts", [&] { t.fp8_casts(); });
  guarded("layernorm and gelu", [&] { t.layernorm_gelu(); });
  guarded("attention", [&] { t.attention(); });
  guarded("adam", [&] { t.adam(); });
  // A few steps of each mode at a small size: the loss is finite and goes down.
  for (Mode mode : {Mode::BF16, Mode::FP8, Mode::FP8_PW}) {
    Config cfg;
    cfg.mode = mode;
    cfg.optimizer = mode == Mode::FP8_PW ? OptimizerKind::Loop : OptimizerKind::Foreach;
    cfg.layers = 2;
    cfg.heads = 2;
    cfg.head_dim = 64;
    cfg.seq = 128;
    cfg.batch = 2;
    cfg.lr = 5e-3f;
    std::vector<float> losses;
    bool ok = true;
    try {
      Model model(c, cfg);
      for (int i = 1; i <= 5; ++i) {
        losses.push_back(model.train_step(i).loss);
        ok = ok && std::isfinite(losses.back()) && (i == 1 || losses.back() < losses[losses.size() - 2]);
      }
    } catch (const std::exception& e) {
      ok = false;
      out << "FAIL  training " << mode_name(mode) << ": " << e.what() << "\n";
    }
    if (!ok) ++t.failures;
    out << (ok ? "ok    " : "FAIL  ") << "training " << mode_name(mode) << " (2 layers, h=128, seq 128, lr 5e-3): loss";
    for (float l : losses) out << ' ' << l;
    out << std::endl;
  }
  return t.failures;
}

}  // namespace snapcapture
