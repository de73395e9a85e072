// Internal: streaming access to large JSON documents whose bulk is one array
// (a Chrome trace's "traceEvents", a memory timeline's rows).
//
// ByteStream delivers the decompressed bytes of an input in order, in
// chunks: a plain file through pread() into a buffer (no mapping, so resident
// memory stays at the buffer's size), a gzip file inflated as it is read, or
// bytes already in memory.
//
// JsonArrayStreamer walks the top level of the document itself (a scalar
// parser for the few bytes outside the big array) and finds each element of
// the chosen array by scanning 64-byte blocks for quotes, backslashes and
// brackets (SSE2 where available): only the strings-and-depth state is
// tracked, so the scan runs at several GB/s. Each element is handed out as
// a complete, padded byte range for simdjson's On-Demand parser, together
// with its index and byte offset for error messages. Memory is the buffer
// (grown only for an element larger than it), never the document.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "util/huge_alloc.hpp"

namespace snapdiff::detail {

// Read buffers: 2 MiB-aligned with huge pages (a fresh buffer is faulted in
// 2 MiB at a time).
using Buffer = HugeVec<char>;

class ByteStream {
 public:
  virtual ~ByteStream() = default;
  // Reads up to n bytes into dst; 0 only at the end of the input. Throws
  // InputError on a read or decompression failure.
  virtual size_t read(char* dst, size_t n) = 0;
  // For progress: bytes of the underlying file consumed so far, and in all.
  virtual uint64_t progress_done() const = 0;
  virtual uint64_t progress_total() const = 0;
  // A guess at the decoded size (exact for plain input), to size buffers.
  virtual uint64_t decoded_hint() const { return progress_total(); }
  // Inflating as it reads (the reading thread then has work of its own).
  virtual bool compressed() const { return false; }
};

// Input text made fit for a one-line error message (control characters
// escaped, at most about 200 characters).
std::string printable(const std::string& s);

// A regular file read with pread(); when gzip, inflated as it is read (with
// concatenated members), refusing more than max_decoded bytes of output.
std::unique_ptr<ByteStream> file_byte_stream(int fd, uint64_t file_size, bool gzip, uint64_t max_decoded);
// Bytes in memory (not copied; they must outlive the stream), inflated when gzip.
std::unique_ptr<ByteStream> memory_byte_stream(const uint8_t* p, size_t n, bool gzip, uint64_t max_decoded);

// An upper bound on the tokens of a JSON text: its brackets, braces,
// commas, colons and quotes (every value but the first of an array or
// object follows one). What a DOM of the text takes is bounded by it: the
// readers that build one count it first, against the memory bound.
uint64_t json_token_bound(std::string_view text);

// The first n bytes of a stream (fewer at its end, or where reading fails:
// format detection works on what could be read, and the reader that follows
// reports the error).
std::string peek(ByteStream& in, size_t n);

class JsonArrayStreamer {
 public:
  static constexpr size_t kPadding = 64;  // bytes readable after every element (simdjson's padding)

  // `array_key`: the top-level member whose array is streamed ("traceEvents");
  // when the document itself is an array, its elements are streamed.
  JsonArrayStreamer(ByteStream& in, std::string array_key, size_t chunk = size_t(8) << 20);

  enum class Item { Element, Member, End };
  // Advances to the next element of the array, or the next other top-level
  // member (its key and its complete value text), or the end of the document.
  Item next();

  // Element: its bytes (padded: kPadding readable bytes follow), its index
  // in the array, and the offset of its first byte in the decoded input.
  const char* data() const { return data_; }
  size_t size() const { return size_; }
  uint64_t index() const { return index_; }
  uint64_t offset() const { return offset_; }
  // The JSON path of the array: "$.traceEvents" or "$".
  const std::string& array_path() const { return array_path_; }
  bool document_is_array() const { return doc_is_array_; }
  bool saw_array() const { return saw_array_; }
  // Member (other than the streamed array): key and raw value text.
  const std::string& key() const { return key_; }
  const std::string& value() const { return value_; }
  // Total decoded bytes consumed so far.
  uint64_t position() const { return base_ + pos_; }

  // Hand-off mode (for parsing elements on other threads without copying
  // them): instead of moving unread bytes to the front of its buffer, the
  // streamer starts a new buffer with them and retires the old one, which
  // keeps every element handed out from it at its place. Elements are
  // addressed by buffer generation and offset.
  void set_handoff(bool on) { handoff_ = on; }
  uint64_t generation() const { return generation_; }
  size_t data_offset() const { return size_t(data_ - buf_.data()); }
  // Retired buffers, oldest first (generation() counts them).
  bool has_retired() const { return !retired_.empty(); }
  Buffer pop_retired();
  // The current buffer, at the end of the input.
  Buffer release_buffer();
  // A buffer to reuse for a later generation.
  void give_spare(Buffer&& b) { spare_.push_back(std::move(b)); }
  // The largest single value (an element, a member) the buffer grows to
  // hold: 1 GiB unless the memory bound allows less. Beyond it: InputError.
  void set_max_value(size_t bytes) { max_value_ = bytes; }

 private:
  enum class State { Start, Members, AfterMember, Array, AfterElement, Done };
  bool fill();                 // reads more; false at the end of the input
  bool ensure(size_t n);       // at least n bytes from pos_ (false: input ended first)
  void compact();              // drops bytes before pos_
  char peek_nonspace();        // skips whitespace; '\0' at the end of the input
  [[noreturn]] void fail(const std::string& path, const std::string& msg) const;
  [[noreturn]] void fail_at(uint64_t offset, const std::string& msg) const;
  // Finds the end (one past the closing bracket) of the object or array
  // starting at pos_; returns 0 when the input ends first.
  size_t scan_container();
  size_t scan_string();        // end of the string starting at pos_ (one past the quote); 0: truncated
  size_t scan_scalar();        // end of a number/literal at pos_
  std::string read_key();

  ByteStream& in_;
  std::string array_key_, array_path_;
  Buffer buf_;
  size_t pos_ = 0, end_ = 0;   // unread bytes are [pos_, end_)
  uint64_t base_ = 0;          // decoded offset of buf_[0]
  bool eof_ = false;
  State state_ = State::Start;
  bool doc_is_array_ = false, saw_array_ = false;
  const char* data_ = nullptr;
  size_t size_ = 0;
  uint64_t index_ = 0, next_index_ = 0, offset_ = 0;
  std::string key_, value_;
  bool handoff_ = false;
  bool handed_ = false;  // an element was handed out from buf_ (hand-off mode retires it, never moves it)
  size_t max_value_ = size_t(1) << 30;
  uint64_t generation_ = 0;
  std::vector<Buffer> retired_, spare_;
};

}  // namespace snapdiff::detail
