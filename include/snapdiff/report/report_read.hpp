// snapdiff/report/report_read.hpp — the report view read back from the JSON
// render_json() wrote (schemas/report.schema.json): the map step's summary
// of one rank, read by the reduce step (`snapdiff ranks`).
//
// Lossless for what the renderers show: render_json(read_report_json(
// render_json(r))) == render_json(r), and render_text() likewise (a test
// holds both for every input in the repository, docs/formats.md "Reading a
// report's JSON back"). Ids that point into a Trace are not in the JSON and
// are left unset: SiteRow::stack and ::rule (0 when the row has a rule; its
// name is read), OpRow::python and ::stack, ExplainItem::stack, and the
// FrameRef::label of frames inside stacks (the labels the text report
// prints are read: user frames, call sites, site paths).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "snapdiff/view/report.hpp"

namespace snapdiff {

// Throws InputError with the JSON path of the first problem ("$.devices[0].
// peaks.requested.bytes: expected an integer") and `name` as its file; a JSON
// document that is not a snapdiff report (its "schema" is not
// "snapdiff/report/N" of a version this build reads) is refused by name.
Report read_report_json(std::string_view text, const std::string& name);

// A map step's summary as stored (`snapdiff ranks` reads each with it; the
// summary reader's fuzz target calls it): its bytes, JSON or gzip of JSON
// (told by the bytes), at most max_decoded_bytes once gzip is unwrapped,
// and, with max_memory_bytes (0: no bound), at most what that bound allows
// (kSummaryMemoryPerByte a byte of text: the refusal names --max-memory);
// then read_report_json(); the snapshot's name it gives (input.name) at most
// kMaxSummaryNameBytes. Throws InputError with `name` as its file.
constexpr uint64_t kMaxSummaryBytes = uint64_t(64) << 20;
constexpr uint64_t kSummaryMemoryPerByte = 10;
constexpr size_t kMaxSummaryNameBytes = 4096;  // PATH_MAX
Report read_summary(std::string_view bytes, const std::string& name, uint64_t max_decoded_bytes = kMaxSummaryBytes,
                    uint64_t max_memory_bytes = 0);

}  // namespace snapdiff
