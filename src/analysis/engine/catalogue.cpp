#include "snapdiff/analysis/catalogue.hpp"

namespace snapdiff {

const char* severity_name(Severity s) {
  switch (s) {
    case Severity::Info: return "info";
    case Severity::Warning: return "warning";
    case Severity::Error: return "error";
  }
  return "info";
}

const std::vector<CatalogueEntry>& catalogue() {
  using K = CodeKind;
  using S = Severity;
  static const std::vector<CatalogueEntry> table = {
      {Code::Peak, "peak", K::ReportFinding, S::Info,
       "where the requested peak is (iteration, phase) and what it is made of, by category"},
      {Code::OptimizerTransient, "optimizer_transient", K::ReportFinding, S::Info,
       "the optimizer step that rises most above its start: its temporaries against the gradients, and its largest site"},
      {Code::Unknown, "unknown", K::ReportFinding, S::Warning,
       "bytes at the peak that no rule placed (1% of the peak or more), and how many were allocated before a profiler started"},
      {Code::Growth, "growth", K::ReportFinding, S::Warning,
       "memory that grows every iteration: the growth per iteration, and the sites whose allocations outlive two iterations (bytes and count per iteration; `leaked` at the peak)"},
      {Code::DiffPeak, "peak", K::DiffFinding, S::Info, "how far and where the requested peak moves from A to B"},
      {Code::DiffCategory, "category", K::DiffFinding, S::Info,
       "a category whose bytes at the peak change materially, with the sites or parameter sizes behind it"},
      {Code::DiffOptimizerTransient, "optimizer_transient", K::DiffFinding, S::Info,
       "the change of the largest optimizer step's temporaries, and what kind of step each run takes"},
      {Code::DiffReserved, "reserved", K::DiffFinding, S::Info,
       "the reserved peak changes materially: reserved and allocated peaks of each run, the cache's free bytes and largest free block at each peak"},
      {Code::DiffPhase, "phase", K::DiffFinding, S::Info,
       "a kind of phase other than the peak's whose peak moves, beyond the overall peak's move, by 5% of the larger phase peak and 64 MiB or more (at most 3, the largest first): the iteration, each run's phase peak, and the categories that change most at it"},
      {Code::ProfilerWindow, "profiler_window", K::Warning, S::Info,
       "a profiler trace that started with memory already allocated: the peak is that of the profiled window"},
      {Code::HistoryTruncated, "history_truncated", K::Warning, S::Warning,
       "the allocator history starts mid-run (the recording started late, or the ring buffer wrapped): the peak is that of the recorded window"},
      {Code::NoHistory, "no_history", K::Warning, S::Warning,
       "no allocation history: the figures are the dump-time state only, not a peak"},
      {Code::EndStateMismatch, "end_state_mismatch", K::Warning, S::Warning,
       "the replay's end state differs from the segments PyTorch dumped"},
      {Code::ReplayInconsistent, "replay_inconsistent", K::Warning, S::Warning,
       "events that did not fit the replayed allocator (or disagree with a trace's reported totals)"},
      {Code::Oom, "oom", K::Warning, S::Error, "the run hit out-of-memory errors: how many, and what the first asked for"},
      {Code::NoTimestamps, "no_timestamps", K::Warning, S::Info,
       "events without time_us (PyTorch < 2.2): times are event indices"},
      {Code::OutsideAllocator, "outside_allocator", K::Warning, S::Info,
       "a library or another process holds 5% of the device peak or more outside the allocator at the peak (driver calls of the injection library)"},
  };
  return table;
}

const CatalogueEntry& catalogue_entry(Code c) { return catalogue()[size_t(c)]; }

bool code_from_name(std::string_view name, Code* out) {
  for (const CatalogueEntry& e : catalogue())
    if (e.name == name) return *out = e.code, true;
  return false;
}

}  // namespace snapdiff
