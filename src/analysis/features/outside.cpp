// Device memory outside the caching allocator, from the driver calls the
// injection library recorded: who holds what from the driver over time, the
// rest of what cudaMemGetInfo saw (the context and everything unrecorded),
// and the total device peak beside the allocator's own.
#include "snapdiff/analysis/outside.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace snapdiff {

namespace {

// A row's identity: the device, process and caller (Other: by library).
struct Key {
  int device = 0;
  uint32_t pid = 0;
  MemoryCaller caller = MemoryCaller::Unknown;
  std::string library;
  bool operator<(const Key& o) const {
    if (device != o.device) return device < o.device;
    if (pid != o.pid) return pid < o.pid;
    if (caller != o.caller) return rank(caller) < rank(o.caller);
    return library < o.library;
  }
  // PyTorch's allocator first, the libraries, then callers not known.
  static int rank(MemoryCaller c) {
    switch (c) {
      case MemoryCaller::PyTorch: return 0;
      case MemoryCaller::Nccl: return 1;
      case MemoryCaller::Cublas: return 2;
      case MemoryCaller::Cudnn: return 3;
      case MemoryCaller::Other: return 4;
      case MemoryCaller::Unknown: return 5;
    }
    return 5;
  }
};

// A change of one row's bytes at one moment.
struct Delta {
  int64_t time_us;
  uint32_t key;
  int64_t bytes;
};

// What one process holds from the driver, by address and by handle.
struct ProcessState {
  struct Held {
    uint32_t key;
    uint64_t size;
  };
  std::unordered_map<uint64_t, Held> allocs;  // Alloc/AllocAsync by address
  struct Physical {
    uint32_t key;
    uint64_t size;
    bool released = false;
    uint64_t maps = 0;
  };
  std::unordered_map<uint64_t, Physical> handles;  // Create by handle
  struct Mapping {
    uint64_t handle;
    uint64_t size;
  };
  std::map<uint64_t, Mapping> mappings;  // Map by address
};

// The driver calls as deltas on rows: Alloc until the Free of its address;
// Create until its handle is released and no longer mapped.
struct Ledger {
  std::vector<Key> keys;
  std::map<Key, uint32_t> key_index;
  std::vector<Delta> deltas;
  std::map<int, uint64_t> events, unmatched;  // by device

  uint32_t key_of(const DriverMemoryEvent& e, const StringTable& strings) {
    Key k;
    k.device = e.device;
    k.pid = e.pid;
    k.caller = e.caller;
    if (e.caller == MemoryCaller::Other) k.library = std::string(strings.get(e.library));
    auto [it, fresh] = key_index.emplace(k, uint32_t(keys.size()));
    if (fresh) keys.push_back(std::move(k));
    return it->second;
  }

  void give_back(ProcessState& ps, uint64_t handle, int64_t t) {
    auto h = ps.handles.find(handle);
    if (h == ps.handles.end() || !h->second.released || h->second.maps > 0) return;
    deltas.push_back({t, h->second.key, -int64_t(h->second.size)});
    ps.handles.erase(h);
  }

  void read(const Trace& tr) {
    std::unordered_map<uint32_t, ProcessState> procs;
    int64_t last_t = kNoTime;
    for (const DriverMemoryEvent& e : tr.driver_memory) {
      // An untimed call happened after the one before it.
      const int64_t t = e.time_us != kNoTime ? e.time_us : last_t;
      if (e.time_us != kNoTime) last_t = e.time_us;
      ProcessState& ps = procs[e.pid];
      ++events[e.device];
      const int64_t size = int64_t(std::min(e.size, kMaxDeviceBytes));
      switch (e.kind) {
        case DriverMemoryKind::Alloc:
        case DriverMemoryKind::AllocAsync: {
          if (e.addr == 0) break;  // a failed call
          if (auto old = ps.allocs.find(e.addr); old != ps.allocs.end()) {
            // Its free was not recorded: the address is given out again.
            deltas.push_back({t, old->second.key, -int64_t(old->second.size)});
            ps.allocs.erase(old);
          }
          const uint32_t k = key_of(e, tr.strings);
          ps.allocs.emplace(e.addr, ProcessState::Held{k, uint64_t(size)});
          deltas.push_back({t, k, size});
          break;
        }
        case DriverMemoryKind::Free:
        case DriverMemoryKind::FreeAsync: {
          if (e.addr == 0) break;  // cudaFree(nullptr) does nothing
          auto it = ps.allocs.find(e.addr);
          if (it == ps.allocs.end()) {
            ++unmatched[e.device];
            break;
          }
          deltas.push_back({t, it->second.key, -int64_t(it->second.size)});
          ps.allocs.erase(it);
          break;
        }
        case DriverMemoryKind::Create: {
          if (auto old = ps.handles.find(e.handle); old != ps.handles.end()) {
            deltas.push_back({t, old->second.key, -int64_t(old->second.size)});
            ps.handles.erase(old);
          }
          const uint32_t k = key_of(e, tr.strings);
          ps.handles.emplace(e.handle, ProcessState::Physical{k, uint64_t(size)});
          deltas.push_back({t, k, size});
          break;
        }
        case DriverMemoryKind::Map: {
          ps.mappings[e.addr] = {e.handle, e.size};
          if (auto h = ps.handles.find(e.handle); h != ps.handles.end()) ++h->second.maps;
          break;
        }
        case DriverMemoryKind::Unmap: {
          // cuMemUnmap(ptr, size) unmaps every mapping in the range.
          const uint64_t end = e.addr + std::max<uint64_t>(e.size, 1);
          bool any = false;
          for (auto m = ps.mappings.lower_bound(e.addr); m != ps.mappings.end() && m->first < end;) {
            any = true;
            const uint64_t handle = m->second.handle;
            m = ps.mappings.erase(m);
            if (auto h = ps.handles.find(handle); h != ps.handles.end() && h->second.maps > 0) {
              --h->second.maps;
              give_back(ps, handle, t);
            }
          }
          if (!any) ++unmatched[e.device];
          break;
        }
        case DriverMemoryKind::Release: {
          auto h = ps.handles.find(e.handle);
          if (h == ps.handles.end()) {
            ++unmatched[e.device];
            break;
          }
          h->second.released = true;
          give_back(ps, e.handle, t);
          break;
        }
      }
    }
    // Changes in time order; a change without any time comes first.
    std::stable_sort(deltas.begin(), deltas.end(), [](const Delta& a, const Delta& b) { return a.time_us < b.time_us; });
  }
};

int64_t clamp_add(int64_t a, int64_t b) {
  int64_t s = 0;
  return __builtin_add_overflow(a, b, &s) ? (b > 0 ? INT64_MAX : INT64_MIN) : s;
}
int64_t clamp_sub(int64_t a, int64_t b) {
  int64_t s = 0;
  return __builtin_sub_overflow(a, b, &s) ? (b < 0 ? INT64_MAX : INT64_MIN) : s;
}

// The allocator's reserved bytes at time t: after the last timed event at or
// before t (the baseline before the first).
struct ReservedAt {
  const AllocatorSide* side = nullptr;
  int64_t operator()(int64_t t) const {
    if (!side || side->times.empty()) return 0;
    auto it = std::upper_bound(side->times.begin(), side->times.end(), t);
    if (it == side->times.begin()) return side->baseline_reserved;
    return side->reserved[size_t(it - side->times.begin()) - 1];
  }
};

OutsideDevice one_device(int device, const std::vector<uint32_t>& dev_keys, const Ledger& L, const StringTable& strings,
                         const std::vector<const DeviceMemorySample*>& samples, const AllocatorSide* side) {
  OutsideDevice od;
  od.device = device;
  if (auto it = L.events.find(device); it != L.events.end()) od.driver_events = it->second;
  if (auto it = L.unmatched.find(device); it != L.unmatched.end()) od.unmatched_frees = it->second;
  od.samples = samples.size();
  if (!samples.empty()) od.total_bytes = samples.back()->total_bytes;
  const ReservedAt reserved_at{side};
  const bool have_side = side && !side->times.empty();
  if (side) {
    od.first_time_us = side->first_time_us;
    od.peak_time_us = side->peak_time_us;
    od.peak_allocated = side->peak_allocated;
    od.peak_reserved = side->peak_reserved;
  }

  // Local row index per key, and the device's deltas.
  std::unordered_map<uint32_t, size_t> local;
  for (uint32_t k : dev_keys) local.emplace(k, local.size());
  std::vector<Delta> deltas;
  for (const Delta& d : L.deltas)
    if (local.count(d.key)) deltas.push_back({d.time_us, uint32_t(local[d.key]), d.bytes});
  const size_t nk = dev_keys.size();
  if (od.first_time_us == kNoTime) {
    for (const Delta& d : deltas)
      if (d.time_us != kNoTime) {
        od.first_time_us = d.time_us;
        break;
      }
    if (!samples.empty() && (od.first_time_us == kNoTime || samples[0]->time_us < od.first_time_us))
      od.first_time_us = samples[0]->time_us;
  }

  // Rows' bytes after every change at or before t.
  auto state_at = [&](int64_t t) {
    std::vector<int64_t> v(nk, 0);
    for (const Delta& d : deltas) {
      if (d.time_us > t) break;
      v[d.key] = clamp_add(v[d.key], d.bytes);
    }
    return v;
  };

  for (uint32_t k : dev_keys)
    if (od.pids.empty() || od.pids.back() != L.keys[k].pid) od.pids.push_back(L.keys[k].pid);

  // The snapshot's process: the only one whose PyTorch allocator called the
  // driver, else the one whose PyTorch bytes are closest to the allocator's
  // reserved bytes (at the peak, else at the end of the replay).
  int64_t snapshot_row = -1;
  {
    const int64_t t = od.peak_time_us != kNoTime ? od.peak_time_us : (have_side ? side->times.back() : INT64_MAX);
    const std::vector<int64_t> v = state_at(t);
    const int64_t want = reserved_at(t);
    int64_t best = INT64_MAX;
    for (size_t i = 0; i < nk; ++i) {
      if (L.keys[dev_keys[i]].caller != MemoryCaller::PyTorch) continue;
      const int64_t diff = v[i] > want ? clamp_sub(v[i], want) : clamp_sub(want, v[i]);
      if (diff < best) best = diff, snapshot_row = int64_t(i);
    }
    if (snapshot_row >= 0) od.snapshot_pid = L.keys[dev_keys[size_t(snapshot_row)]].pid;
  }
  auto allocator_bytes = [&](const std::vector<int64_t>& v, int64_t t) {
    // The allocator's reserved bytes: the replay's; without one, the
    // snapshot process's PyTorch segments as the driver saw them.
    if (have_side) return reserved_at(t);
    return snapshot_row >= 0 ? v[size_t(snapshot_row)] : int64_t(0);
  };
  // The context at each sample: what it saw in use beyond everything
  // recorded as held then; and the cross-check of the PyTorch row. Each
  // sample keeps the rows that changed since the one before (and the
  // context row, index nk), so this costs the deltas and the samples, not
  // samples x rows.
  std::vector<int64_t> context(samples.size(), 0);
  {
    std::vector<int64_t> v(nk, 0), shown(nk + 1, 0);
    std::vector<uint32_t> touched;
    std::vector<char> is_touched(nk, 0);
    int64_t recorded = 0;  // the sum of v
    size_t di = 0;
    for (size_t s = 0; s < samples.size(); ++s) {
      const int64_t t = samples[s]->time_us;
      for (; di < deltas.size() && deltas[di].time_us <= t; ++di) {
        const uint32_t k = deltas[di].key;
        v[k] = clamp_add(v[k], deltas[di].bytes);
        recorded = clamp_add(recorded, deltas[di].bytes);
        if (!is_touched[k]) is_touched[k] = 1, touched.push_back(k);
      }
      const int64_t used = clamp_sub(int64_t(samples[s]->total_bytes), int64_t(samples[s]->free_bytes));
      // No PyTorch segments recorded: the allocator's own count stands for them.
      const int64_t total = snapshot_row < 0 ? clamp_add(recorded, reserved_at(t)) : recorded;
      context[s] = clamp_sub(used, total);
      OutsideSample os;
      os.time_us = t;
      os.label = std::string(strings.get(samples[s]->label));
      os.used = used;
      std::sort(touched.begin(), touched.end());
      for (uint32_t k : touched) {
        is_touched[k] = 0;
        if (v[k] != shown[k]) os.changes.push_back({k, v[k]}), shown[k] = v[k];
      }
      touched.clear();
      if (context[s] != shown[nk]) os.changes.push_back({uint32_t(nk), context[s]}), shown[nk] = context[s];
      od.over_time.push_back(std::move(os));
      if (snapshot_row >= 0 && have_side && t >= side->times.front() && t <= side->times.back()) {
        ++od.checked_samples;
        const int64_t diff = clamp_sub(v[size_t(snapshot_row)], reserved_at(t));
        if (diff != 0) {
          if (od.mismatched_samples++ == 0) od.first_mismatch_time_us = t;
          auto mag = [](int64_t x) { return x < 0 ? uint64_t(0) - uint64_t(x) : uint64_t(x); };
          if (mag(diff) > mag(od.largest_mismatch))
            od.largest_mismatch = diff;
        }
      }
    }
  }
  // The last sample at or before t (-1: none).
  auto sample_at = [&](int64_t t) {
    int64_t found = -1;
    for (size_t s = 0; s < samples.size() && samples[s]->time_us <= t; ++s) found = int64_t(s);
    return found;
  };

  // The moments the rows are read at.
  const bool peak_known = od.peak_time_us != kNoTime;
  int64_t peak_sample = peak_known ? sample_at(od.peak_time_us) : -1;
  if (peak_sample >= 0) od.peak_sample_time_us = samples[size_t(peak_sample)]->time_us;
  if (!samples.empty()) {
    od.exit_time_us = samples.back()->time_us;
    od.exit_from_sample = true;
  } else if (!deltas.empty()) {
    od.exit_time_us = deltas.back().time_us;
  }
  const std::vector<int64_t> at_peak = peak_known ? state_at(od.peak_time_us) : std::vector<int64_t>(nk, 0);
  const std::vector<int64_t> at_exit = state_at(od.exit_time_us == kNoTime ? INT64_MAX : od.exit_time_us);

  for (size_t i = 0; i < nk; ++i) {
    const Key& k = L.keys[dev_keys[i]];
    OutsideRow row;
    row.pid = k.pid;
    row.caller = k.caller;
    row.library = k.library;
    row.at_peak_known = peak_known;
    row.at_peak = at_peak[i];
    row.at_exit = at_exit[i];
    od.rows.push_back(std::move(row));
  }
  {
    std::vector<int64_t> v(nk, 0);
    for (const Delta& d : deltas) {
      v[d.key] = clamp_add(v[d.key], d.bytes);
      OutsideRow& row = od.rows[d.key];
      if (v[d.key] > row.max_bytes) row.max_bytes = v[d.key], row.max_time_us = d.time_us;
    }
  }
  if (!samples.empty()) {
    OutsideRow row;
    row.context = true;
    row.at_peak_known = peak_sample >= 0;
    row.at_peak = peak_sample >= 0 ? context[size_t(peak_sample)] : 0;
    row.at_exit = context.back();
    row.max_bytes = context[0];
    row.max_time_us = samples[0]->time_us;
    for (size_t s = 1; s < samples.size(); ++s)
      if (context[s] > row.max_bytes) row.max_bytes = context[s], row.max_time_us = samples[s]->time_us;
    od.rows.push_back(std::move(row));
  }
  od.outside_at_peak_known = peak_known && (samples.empty() || peak_sample >= 0);
  for (size_t i = 0; i < od.rows.size(); ++i) {
    if (int64_t(i) == snapshot_row) continue;
    od.outside_at_peak = clamp_add(od.outside_at_peak, od.rows[i].at_peak);
    od.outside_at_exit = clamp_add(od.outside_at_exit, od.rows[i].at_exit);
  }

  // The total device peak: at every moment any input saw, the allocator's
  // reserved bytes, every other recorded holder, and the context of the
  // last sample at or before it (the first sample's before any).
  std::vector<int64_t> moments;
  moments.reserve(deltas.size() + samples.size() + (have_side ? side->times.size() : 0));
  for (const Delta& d : deltas)
    if (d.time_us != kNoTime) moments.push_back(d.time_us);
  for (const DeviceMemorySample* s : samples) moments.push_back(s->time_us);
  if (have_side) moments.insert(moments.end(), side->times.begin(), side->times.end());
  std::sort(moments.begin(), moments.end());
  moments.erase(std::unique(moments.begin(), moments.end()), moments.end());
  {
    std::vector<int64_t> v(nk, 0);
    int64_t recorded = 0;  // the sum of v
    size_t di = 0, si = 0;
    for (int64_t t : moments) {
      for (; di < deltas.size() && deltas[di].time_us <= t; ++di) {
        v[deltas[di].key] = clamp_add(v[deltas[di].key], deltas[di].bytes);
        recorded = clamp_add(recorded, deltas[di].bytes);
      }
      while (si + 1 < samples.size() && samples[si + 1]->time_us <= t) ++si;
      const int64_t ctx = samples.empty() ? 0 : context[si];
      const int64_t alloc = allocator_bytes(v, t);
      const int64_t others = clamp_add(recorded - (snapshot_row >= 0 ? v[size_t(snapshot_row)] : 0), ctx);
      const int64_t total = clamp_add(alloc, others);
      if (!od.device_peak_known || total > od.device_peak.bytes) {
        od.device_peak_known = true;
        od.device_peak = {total, t, alloc, others};
      }
    }
  }
  return od;
}

}  // namespace

std::vector<OutsideDevice> outside_allocator(const Trace& t, const std::vector<AllocatorSide>& sides) {
  std::vector<OutsideDevice> out;
  if (t.driver_memory.empty()) return out;
  Ledger L;
  L.read(t);
  std::map<int, std::vector<uint32_t>> keys_by_device;  // keys in Key order: pid, then caller
  for (const auto& [k, i] : L.key_index) keys_by_device[k.device].push_back(i);
  for (const auto& [dev, n] : L.events) keys_by_device[dev];  // a device with only unmatched calls
  for (const auto& [dev, keys] : keys_by_device) {
    std::vector<const DeviceMemorySample*> samples;
    for (const DeviceMemorySample& s : t.device_memory)
      if (s.device == dev && s.time_us != kNoTime) samples.push_back(&s);
    std::stable_sort(samples.begin(), samples.end(),
                     [](const DeviceMemorySample* a, const DeviceMemorySample* b) { return a->time_us < b->time_us; });
    const AllocatorSide* side = nullptr;
    for (const AllocatorSide& s : sides)
      if (s.device == dev) side = &s;
    out.push_back(one_device(dev, keys, L, t.strings, samples, side));
  }
  return out;
}

std::string outside_row_name(const OutsideRow& r) {
  if (r.context) return "context and unrecorded";
  switch (r.caller) {
    case MemoryCaller::PyTorch: return "PyTorch";
    case MemoryCaller::Nccl: return "NCCL";
    case MemoryCaller::Cublas: return "cuBLAS";
    case MemoryCaller::Cudnn: return "cuDNN";
    case MemoryCaller::Other: return r.library.empty() ? "other library" : r.library;
    case MemoryCaller::Unknown: return "unknown caller";
  }
  return "unknown caller";
}

}  // namespace snapdiff
