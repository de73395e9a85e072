// snapdiff/analysis/whatif.hpp — a recorded run's request stream replayed
// through a model of PyTorch's CUDA caching allocator under other settings
// (`snapdiff whatif`, docs/whatif.md).
//
// The exact replay (replay.hpp) follows the addresses a run recorded; this
// model decides them: which cached block serves a request (best fit on the
// request's stream and pool, PyTorch's max_split_size rules), when a block
// is split, when a segment is cudaMalloc'd and how large, what is released
// when a cudaMalloc would pass the memory limit (oversize blocks, then every
// free segment, as PyTorch retries), garbage collection under a memory
// fraction, and expandable segments (one address range per stream and pool,
// mapped and unmapped in pages). What it keeps from the recording: each
// allocation's requested size and stream, the order of requests and frees,
// when a freed block came back (free_completed), and empty_cache() calls.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "snapdiff/analysis/replay.hpp"
#include "snapdiff/model/model.hpp"

namespace snapdiff {

// A PYTORCH_CUDA_ALLOC_CONF value as the model uses it.
struct AllocConf {
  std::string text;  // as given
  bool expandable_segments = false;
  int64_t max_split_size = -1;  // bytes; -1 unlimited
  double garbage_collection_threshold = 0.0;
  std::vector<uint64_t> roundup_power2_divisions;  // 16 buckets (1 MiB .. 32 GiB and above); empty: none
  std::vector<std::string> notes;  // settings accepted that change nothing here ("release_lock_on_cudamalloc ...")
};
// Parses "key:value,key:value" as PyTorch 2.11 does for the CUDA caching
// allocator. Throws UsageError naming the setting for what the model does
// not cover (backend:cudaMallocAsync, pinned_* (host memory), unknown keys)
// or cannot read.
AllocConf parse_alloc_conf(std::string_view text);
// The settings a recording ran with (Trace::settings), as an AllocConf.
AllocConf alloc_conf_of(const AllocatorSettings& s);

struct WhatIfOom {
  int64_t event_index = -1;  // the recorded alloc event that would fail
  uint64_t requested_bytes = 0;
  uint64_t reserved_bytes = 0;  // reserved when it fails
};

struct WhatIfScenario {
  std::string alloc_conf;
  int64_t requested = 0, allocated = 0, active = 0, reserved = 0;  // peaks over the window
  int64_t reserved_peak_event = -1;
  uint64_t segments = 0;       // live at the reserved peak (expandable: mapped ranges)
  uint64_t segments_peak = 0;  // most live at once
  int64_t cached_at_peak = 0;  // reserved - allocated at the allocated peak: cached in free blocks when memory is tightest
  uint64_t cuda_mallocs = 0, cuda_frees = 0;  // segment allocations and releases (maps/unmaps for expandable)
  std::optional<WhatIfOom> oom;
  std::vector<std::string> notes;
};

struct WhatIfOptions {
  unsigned threads = 2;  // scenarios modelled at once
  // Bytes the process may reserve (0: no limit). `limit_is_fraction`: the
  // limit is a per-process memory fraction (set_per_process_memory_fraction),
  // which also enables garbage_collection_threshold, as in PyTorch.
  int64_t memory_limit = 0;
  bool limit_is_fraction = false;
};

struct WhatIfResult {
  int device = 0;
  uint64_t events = 0, allocs = 0;
  bool partial = false;  // the history does not start with an empty allocator: the window only
  Truncation truncation = Truncation::None;
  uint64_t unknown_frees = 0;  // frees of blocks allocated before the window (not modelled)
  int64_t memory_limit = 0;
  std::string limit_source;  // "given", "the recorded OOM (reserved + device free)", "none"
  // The recorded run: its settings and its peaks from the exact replay
  // (PyTorch's counters), and the model under those same settings, whose
  // difference from them is the model's error on this run.
  std::string recorded_conf;
  int64_t recorded_requested = 0, recorded_allocated = 0, recorded_active = 0, recorded_reserved = 0;
  bool recorded_oom = false;
  WhatIfScenario calibration;
  std::vector<WhatIfScenario> scenarios;  // in the order asked
};

// Predicts each setting's figures for the device with the most allocations.
// Throws UsageError when the trace has no allocation history.
WhatIfResult what_if(const Trace& trace, const std::vector<AllocConf>& confs, const WhatIfOptions& opts);
// The device what_if() models: the one with the most allocations (nullptr:
// no allocation history).
const Device* whatif_device(const Trace& trace);
// what_if() on `device` with its exact replay already made (replay_device(),
// or the analysis's: only its truncation and its four peaks are read, the
// peaks for the recorded_* figures): the OOM section models its error with
// the replay analyze() made instead of replaying the run again.
WhatIfResult what_if(const Trace& trace, const Device& device, const DeviceReplay& replay,
                     const std::vector<AllocConf>& confs, const WhatIfOptions& opts);

// The settings `snapdiff whatif --sweep` tries, the recording's own first.
std::vector<std::string> sweep_alloc_confs();

}  // namespace snapdiff
