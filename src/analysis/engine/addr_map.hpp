// Internal: open-addressing hash map from 64-bit addresses to 32-bit slots
// (linear probing, backward-shift deletion). The replay does several lookups
// per event; std::unordered_map costs too much there.
#pragma once

#include <cstdint>
#include <vector>

namespace snapdiff::detail {

class AddrMap {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;
  AddrMap() { rehash(1024); }
  uint32_t find(uint64_t k) const {
    if (k == kEmpty) return special_;
    size_t i = slot(k);
    while (keys_[i] != kEmpty) {
      if (keys_[i] == k) return vals_[i];
      i = (i + 1) & mask_;
    }
    return kNone;
  }
  void put(uint64_t k, uint32_t v) {
    if (k == kEmpty) {
      if (special_ == kNone) ++size_;
      special_ = v;
      return;
    }
    if ((size_ + 1) * 2 > keys_.size()) rehash(keys_.size() * 2);
    size_t i = slot(k);
    while (keys_[i] != kEmpty) {
      if (keys_[i] == k) {
        vals_[i] = v;
        return;
      }
      i = (i + 1) & mask_;
    }
    keys_[i] = k;
    vals_[i] = v;
    ++size_;
  }
  void erase(uint64_t k) {
    if (k == kEmpty) {
      if (special_ != kNone) --size_;
      special_ = kNone;
      return;
    }
    size_t i = slot(k);
    while (keys_[i] != k) {
      if (keys_[i] == kEmpty) return;
      i = (i + 1) & mask_;
    }
    // Backward-shift deletion keeps probe sequences intact.
    size_t j = i;
    for (;;) {
      j = (j + 1) & mask_;
      if (keys_[j] == kEmpty) break;
      size_t home = slot(keys_[j]);
      bool move = (j > i) ? (home <= i || home > j) : (home <= i && home > j);
      if (move) {
        keys_[i] = keys_[j];
        vals_[i] = vals_[j];
        i = j;
      }
    }
    keys_[i] = kEmpty;
    --size_;
  }
  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  size_t slot(uint64_t k) const { return size_t((k * 0x9E3779B97F4A7C15ull) >> shift_) & mask_; }
  void rehash(size_t cap) {
    std::vector<uint64_t> ok;
    std::vector<uint32_t> ov;
    ok.swap(keys_);
    ov.swap(vals_);
    keys_.assign(cap, kEmpty);
    vals_.assign(cap, 0);
    mask_ = cap - 1;
    shift_ = 64 - unsigned(__builtin_ctzll(cap));
    size_t special = special_ == kNone ? 0 : 1;
    size_ = special;
    for (size_t i = 0; i < ok.size(); ++i)
      if (ok[i] != kEmpty) put(ok[i], ov[i]);
  }
  std::vector<uint64_t> keys_;
  std::vector<uint32_t> vals_;
  size_t mask_ = 0;
  unsigned shift_ = 0;
  size_t size_ = 0;
  uint32_t special_ = kNone;
};

}  // namespace snapdiff::detail
