// `snapdiff ranks`: the summary reader (read_summary: JSON or gzip'd JSON,
// a map step's `report --format json`), the rank told from the name the
// summary gives (rank_from_name: linear, no recursion), and the ranks view
// and its renderings over two copies of the summary under two names.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_common.hpp"
#include "snapdiff/analysis/ranks.hpp"
#include "snapdiff/input/ranks.hpp"
#include "snapdiff/report/ranks_report.hpp"
#include "snapdiff/report/report_read.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace snapdiff;
  fuzz::expect_result_or_input_error([&] {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    Report r = read_summary(bytes, "rank0.json", kMaxSummaryBytes, uint64_t(512) << 20);
    std::vector<RankEntry> entries;
    for (int k = 0; k < 2; ++k) {
      RankEntry e;
      e.name = k == 0 ? r.input_name : r.input_name + "_" + std::to_string(k);
      const RankName n = rank_from_name(e.name);
      e.rank = n.rank;
      e.step = n.step;
      e.oom_file = n.oom;
      e.report = r;
      entries.push_back(std::move(e));
    }
    const RanksView v = build_ranks_view(std::move(entries), {}, {});
    (void)render_ranks_text(v);
    (void)render_ranks_json(v);
    (void)render_ranks_markdown(v);
  });
  return 0;
}
