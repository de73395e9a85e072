// snapcapture: runs the reference transformer workload on a GPU with an
// instrumented caching allocator and writes what it recorded as .snap (and,
// on request, as a PyTorch-compatible snapshot pickle).
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model.hpp"
#include "run.hpp"
#include "selftest.hpp"
#include "snapdiff/input/input.hpp"
#include "util/terminal_text.hpp"

namespace po = boost::program_options;
using namespace snapcapture;

namespace {

uint64_t parse_bytes(const std::string& s) {
  size_t pos = 0;
  double v = std::stod(s, &pos);
  std::string unit = s.substr(pos);
  double mul = 1;
  if (unit == "K" || unit == "KiB") mul = 1024.0;
  else if (unit == "M" || unit == "MiB") mul = 1024.0 * 1024;
  else if (unit == "G" || unit == "GiB") mul = 1024.0 * 1024 * 1024;
  else if (!unit.empty()) throw std::invalid_argument("unknown unit '" + unit + "' (use K, M or G)");
  return uint64_t(v * mul);
}

// One line on stderr through the project's one escaper.
void say(const std::string& message) {
  std::cerr << snapdiff::escape_for_terminal(message) << "\n";
}

std::string gib(int64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", double(b) / (1024.0 * 1024 * 1024));
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  // The injection library's launcher and converter (run.cpp), before the
  // workload's options.
  if (argc > 1 && std::string(argv[1]) == "run") return snapcapture::run_main(argc - 2, argv + 2);
  if (argc > 1 && std::string(argv[1]) == "convert") return snapcapture::convert_main(argc - 2, argv + 2);
  Config cfg;
  std::string mode = "bf16", optimizer, output, pickle, memory_limit, summary;
  bool no_record = false, selftest = false;
  po::options_description desc(
      "snapcapture: run the reference transformer workload on a GPU with an instrumented\n"
      "caching allocator and write its memory history as .snap\n\nOptions");
  desc.add_options()("help,h", "this help")
      ("mode", po::value(&mode)->default_value("bf16"), "bf16 | fp8 (FP8 compute, bf16 primary weights) | fp8_pw (FP8 primary weights)")
      ("optimizer", po::value(&optimizer), "foreach | loop (default: foreach for bf16 and fp8, loop for fp8_pw)")
      ("layers", po::value(&cfg.layers)->default_value(32), "transformer layers")
      ("heads", po::value(&cfg.heads)->default_value(32), "attention heads")
      ("head-dim", po::value(&cfg.head_dim)->default_value(128), "head size (hidden = heads x head-dim)")
      ("seq", po::value(&cfg.seq)->default_value(4096), "sequence length")
      ("batch", po::value(&cfg.batch)->default_value(1), "batch size")
      ("iters", po::value(&cfg.iters)->default_value(3), "training iterations")
      ("lr", po::value(&cfg.lr)->default_value(1e-4f), "Adam learning rate")
      ("seed", po::value(&cfg.seed)->default_value(1234), "random seed")
      ("output,o", po::value(&output), "write the recording as .snap (gzip'd)")
      ("pickle", po::value(&pickle), "also write a PyTorch-compatible snapshot pickle")
      ("summary", po::value(&summary), "write per-iteration figures as JSON")
      ("memory-limit", po::value(&memory_limit), "cap the device memory the allocator may take (e.g. 8G)")
      ("no-record", po::bool_switch(&no_record), "do not record events (to measure the recording's overhead)")
      ("selftest", po::bool_switch(&selftest), "check every kernel against a CPU reference and train each mode briefly");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
    if (vm.count("help")) {
      std::cout << desc << "\n";
      return 0;
    }
    if (mode == "bf16") cfg.mode = Mode::BF16;
    else if (mode == "fp8") cfg.mode = Mode::FP8;
    else if (mode == "fp8_pw") cfg.mode = Mode::FP8_PW;
    else throw std::invalid_argument("--mode must be bf16, fp8 or fp8_pw");
    if (optimizer.empty()) optimizer = cfg.mode == Mode::FP8_PW ? "loop" : "foreach";
    if (optimizer == "foreach") cfg.optimizer = OptimizerKind::Foreach;
    else if (optimizer == "loop") cfg.optimizer = OptimizerKind::Loop;
    else throw std::invalid_argument("--optimizer must be foreach or loop");
    if (cfg.layers < 1 || cfg.heads < 1 || cfg.head_dim < 16 || cfg.head_dim % 16 || cfg.seq < 16 ||
        cfg.seq % 16 || cfg.batch < 1 || cfg.iters < 1)
      throw std::invalid_argument("sizes: layers, heads, batch, iters >= 1; head-dim and seq multiples of 16");
  } catch (const std::exception& e) {
    say(std::string("snapcapture: error: ") + e.what());
    return 2;
  }

  int dev_count = 0;
  if (cudaGetDeviceCount(&dev_count) != cudaSuccess || dev_count == 0) {
    say("snapcapture: error: no CUDA device");
    return 1;
  }
  cuda_check(cudaSetDevice(0), "cudaSetDevice");
  cuda_check(cudaFree(nullptr), "CUDA context");
  cudaDeviceProp prop{};
  cuda_check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);

  CudaDevice device(memory_limit.empty() ? 0 : parse_bytes(memory_limit));
  CachingAllocator alloc(device, 0);
  alloc.set_recording(!no_record);
  Gemm gemm;
  Ctx ctx{alloc, gemm};
  ctx.record_kernels = !no_record;

  if (selftest) {
    int f = run_selftest(ctx, std::cout);
    std::cout << (f ? "selftest: " + std::to_string(f) + " FAILED\n" : std::string("selftest: all passed\n"));
    return f ? 1 : 0;
  }

  auto sample = [&](const std::string& label) {
    size_t free_b = 0, total_b = 0;
    cuda_check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    alloc.record_device_memory(label, free_b, total_b);
  };
  sample("start (CUDA context, cuBLASLt handle)");

  std::ostringstream cmdline;
  for (int i = 0; i < argc; ++i) cmdline << (i ? " " : "") << argv[i];
  std::printf("snapcapture: %s, %s optimizer, %d layers, %d heads x %d, seq %d, batch %d, %d iterations on %s\n",
              mode_name(cfg.mode), optimizer.c_str(), cfg.layers, cfg.heads, cfg.head_dim, cfg.seq, cfg.batch,
              cfg.iters, snapdiff::escape_for_terminal(prop.name).c_str());
  auto wall0 = std::chrono::steady_clock::now();
  std::vector<IterStats> iters;
  std::string failure;
  bool oom = false;
  nlohmann::json classes;
  {
    std::unique_ptr<Model> model;
    try {
      model = std::make_unique<Model>(ctx, cfg);
      cuda_check(cudaDeviceSynchronize(), "init");
      sample("after init");
      model->on_phase = sample;
      std::printf("  parameters %s\n", gib(model->param_bytes()).c_str());
      for (int i = 1; i <= cfg.iters; ++i) {
        IterStats st = model->train_step(i);
        iters.push_back(st);
        std::printf("  iter %d: loss %.6g, %.3f s, allocated %s, peak %s\n", i, double(st.loss), st.seconds,
                    gib(st.allocated_after).c_str(), gib(st.peak_so_far).c_str());
        std::fflush(stdout);
      }
      classes = {{"param_bytes", model->param_bytes()},
                 {"grad_bytes", model->grad_bytes()},
                 {"optimizer_state_bytes", model->optimizer_state_bytes()}};
    } catch (const OutOfMemory& e) {
      oom = true;
      failure = std::string("out of memory: ") + e.what();
    } catch (const std::exception& e) {
      failure = e.what();
    }
    if (!failure.empty()) say("snapcapture: " + failure + " (the recording is still written)");
    cudaDeviceSynchronize();
    sample("end");
    // The model stays alive until here, so the snapshot's segments show it, as
    // PyTorch's _dump_snapshot after the last iteration does.
    if (!output.empty() || !pickle.empty()) {
      snapdiff::Trace t = alloc.to_trace();
      auto& md = t.metadata;
      md.emplace_back("producer", "snapcapture");
      md.emplace_back("command", cmdline.str());
      md.emplace_back("mode", mode_name(cfg.mode));
      md.emplace_back("optimizer", optimizer);
      md.emplace_back("config", "layers=" + std::to_string(cfg.layers) + " heads=" + std::to_string(cfg.heads) +
                                    " head_dim=" + std::to_string(cfg.head_dim) + " seq=" + std::to_string(cfg.seq) +
                                    " batch=" + std::to_string(cfg.batch) + " iters=" + std::to_string(cfg.iters));
      md.emplace_back("gpu", prop.name);
      md.emplace_back("cuda_driver", std::to_string(driver));
      md.emplace_back("cuda_runtime", std::to_string(runtime));
      if (!failure.empty()) md.emplace_back("failure", failure);
      try {
        if (!output.empty()) snapdiff::write_snap_file(t, output);
        if (!pickle.empty()) snapdiff::write_torch_pickle_file(t, pickle, false);
      } catch (const std::exception& e) {
        say(std::string("snapcapture: error: writing the recording: ") + e.what());
        return 1;
      }
    }
  }
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  const AllocatorStats& s = alloc.stats();
  std::printf("  peak requested %s, allocated %s, reserved %s; %llu kernel launches; %.1f s\n",
              gib(s.peak_requested).c_str(), gib(s.peak_allocated).c_str(), gib(s.peak_reserved).c_str(),
              (unsigned long long)ctx.kernel_launches, wall);
  if (!summary.empty()) {
    nlohmann::json j = {{"mode", mode_name(cfg.mode)}, {"optimizer", optimizer}, {"gpu", prop.name},
                        {"command", cmdline.str()}, {"recording", !no_record}, {"wall_seconds", wall},
                        {"peak_requested", s.peak_requested}, {"peak_allocated", s.peak_allocated},
                        {"peak_reserved", s.peak_reserved}, {"kernel_launches", ctx.kernel_launches},
                        {"oom", oom}, {"failure", failure}, {"classes", classes}};
    for (const IterStats& st : iters)
      j["iters"].push_back({{"iter", st.iter}, {"seconds", st.seconds}, {"loss", st.loss},
                            {"allocated_after", st.allocated_after}, {"peak_so_far", st.peak_so_far}});
    std::ofstream(summary) << j.dump(1) << "\n";
  }
  return failure.empty() ? 0 : (oom ? 4 : 1);
}
