#include "util/input_files.hpp"

#include <map>
#include <mutex>
#include <utility>

namespace snapdiff {

namespace {

struct Registry {
  std::mutex mu;
  bool on = false;
  std::map<std::pair<dev_t, ino_t>, std::string> files;
};

Registry& registry() {
  static Registry r;
  return r;
}

// A folder of 100,000 ranks keeps 100,000 entries: a few MB. Beyond this the
// oldest are not dropped; new ones are simply not kept (an output clash with
// one of them is then caught only by the rename's own checks).
constexpr size_t kMaxKept = 1 << 20;

}  // namespace

void keep_input_files(bool on) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.on = on;
  if (!on) r.files.clear();
}

void note_input_file(const struct stat& st, const std::string& path) {
  if (!S_ISREG(st.st_mode)) return;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.on || r.files.size() >= kMaxKept) return;
  r.files.emplace(std::make_pair(st.st_dev, st.st_ino), path.substr(0, 4096));
}

std::string input_file_named(dev_t dev, ino_t ino) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.files.find({dev, ino});
  return it == r.files.end() ? std::string() : it->second;
}

}  // namespace snapdiff
