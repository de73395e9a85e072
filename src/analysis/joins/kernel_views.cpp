// BY KERNEL for inputs with kernel launches and no ops
// (analysis/kernel_views.hpp, docs/attribution.md "The kernel of an
// allocation").
#include "analysis/joins/kernel_views.hpp"

#include <algorithm>
#include <map>

#include "analysis/joins/profiler_views.hpp"
#include "analysis/analyze/report_view_build.hpp"

namespace snapdiff::detail {

namespace {

struct Acc {
  OpRow row;
  StackId stack = 0;  // the largest allocation's, written out into row.stack_frames
  std::vector<int64_t> by_cat;
  std::map<std::string, int64_t> by_site;
  uint64_t largest = 0;
};

}  // namespace

void kernels_at_peak(const Trace& t, const FrameTable& ft, const StreamLaunches& launches, const Device& dev,
                     DeviceAnalysis& d, size_t top) {
  if (!t.ops.empty() || launches.empty() || d.peak_index < 0) return;
  const Attribution& at = d.attr;
  const std::vector<uint32_t> live = at.live_at(d.peak_index);
  const std::vector<AllocationKernels> ks = allocation_kernels(launches, dev, at, live, d.peak_index);
  d.kernels_only = true;
  KernelCoverage& cov = d.kernel_coverage;
  cov.present = true;
  const int unknown = at.unknown_index();
  std::map<std::string, Acc> rows;
  std::map<std::string, int64_t> unknown_by_kernel;
  std::map<std::pair<uint16_t, std::string>, int64_t> by_category_kernel;
  for (size_t i = 0; i < live.size(); ++i) {
    const Allocation& al = at.allocations[live[i]];
    const int64_t b = int64_t(al.requested);
    ++cov.allocations;
    cov.bytes += b;
    std::string kernel;
    if (ks[i].kernel >= 0) {
      ++cov.with_kernel;
      cov.bytes_with_kernel += b;
      kernel = kernel_display_name(t.strings.get(t.kernels[size_t(ks[i].kernel)].name));
    }
    Acc& a = rows[kernel];
    a.row.bytes += b;
    ++a.row.count;
    if (a.by_cat.empty()) a.by_cat.assign(at.categories.size(), 0);
    a.by_cat[al.category] += b;
    const FrameId uf = ft.user_frame(al.stack);
    a.by_site[al.stack == 0 ? std::string() : ft.label(uf)] += b;
    if (al.requested >= a.largest) {
      a.largest = al.requested;
      a.stack = al.stack;
    }
    if (int(al.category) == unknown && !kernel.empty()) unknown_by_kernel[kernel] += b;
    if (!kernel.empty()) by_category_kernel[{al.category, kernel}] += b;
  }
  std::vector<Acc*> out;
  for (auto& [kernel, a] : rows) {
    OpRow& r = a.row;
    r.kernel = kernel;
    r.category = int(std::max_element(a.by_cat.begin(), a.by_cat.end()) - a.by_cat.begin());
    int64_t best = -1;
    for (auto& [site, bytes] : a.by_site)
      if (bytes > best) r.other = site, best = bytes;
    out.push_back(&a);
  }
  std::sort(out.begin(), out.end(), [](const Acc* x, const Acc* y) {
    const OpRow &a = x->row, &b = y->row;
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.kernel < b.kernel;
  });
  d.kernel_rows = out.size();
  d.other_kernels = OpRow{};
  resolve_op_row(ft, at, kNoFrame, 0, d.other_kernels);
  d.by_kernel.clear();
  for (size_t i = 0; i < out.size(); ++i) {
    if (i < top) {
      d.by_kernel.push_back(std::move(out[i]->row));
      resolve_op_row(ft, at, kNoFrame, out[i]->stack, d.by_kernel.back());
    } else {
      d.other_kernels.bytes += out[i]->row.bytes;
      d.other_kernels.count += out[i]->row.count;
    }
  }
  // The peak's temporary and unknown parts name the kernel most of their
  // bytes were made for.
  for (Finding& f : d.findings)
    if (auto* p = std::get_if<PeakFacts>(&f.facts))
      for (PeakFacts::Part& part : p->parts) {
        if (part.category != "temporary" && part.category != "unknown") continue;
        for (auto& [key, bytes] : by_category_kernel)
          if (at.categories[key.first] == part.category && bytes > part.kernel_bytes)
            part.kernel = key.second, part.kernel_bytes = bytes;
      }
  // The Unknown finding names the kernel most of those bytes were made for.
  if (!unknown_by_kernel.empty())
    for (Finding& f : d.findings)
      if (auto* u = std::get_if<UnknownFacts>(&f.facts)) {
        for (auto& [kernel, bytes] : unknown_by_kernel)
          if (bytes > u->kernel_bytes) u->kernel = kernel, u->kernel_bytes = bytes;
      }
}

}  // namespace snapdiff::detail
