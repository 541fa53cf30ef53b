// Bytes of a file or of memory at given offsets, for the fatbin readers. A library on disk is
// read with pread into small buffers rather than mapped: on the hosts measured (bench/inspect)
// mapping costs a page-table update per 4 KiB page, several times the cost of copying the same
// bytes out of the page cache, and a container's headers cost one small read each instead of a
// page fault each.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "binary/bytes.hpp"
#include "core/error.hpp"

namespace archbuild::binary {

class ByteReader {
 public:
  // Reads from memory that outlives the reader (a zip member, a mapping, a test's buffer).
  explicit ByteReader(Bytes memory);
  // Reads the file with pread. Errors (exit 2) name the path.
  static Result<ByteReader> open(const std::filesystem::path& path);
  // Another reader of the same input with its own window, for another thread (a file's
  // descriptor is duplicated; pread keeps no shared position).
  Result<ByteReader> sibling() const;

  ByteReader(ByteReader&& other) noexcept;
  ByteReader& operator=(ByteReader&& other) noexcept;
  ByteReader(const ByteReader&) = delete;
  ByteReader& operator=(const ByteReader&) = delete;
  ~ByteReader();

  std::uint64_t size() const { return size_; }
  bool in_memory() const { return fd_ < 0; }
  // The whole input when it is in memory, else empty.
  Bytes memory() const { return memory_; }

  // [offset, offset + length), valid until the next view or window call on this reader.
  // Throws Malformed when the range runs past the end or the file cannot be read. From a
  // file, one pread fills a small window, so a container header and its first entry header
  // cost one system call, and headers inside the scan's last window cost none.
  static constexpr std::size_t kViewMax = 4096;
  Bytes view(std::uint64_t offset, std::size_t length);

  // The bytes from `offset` to the end of the window, at least `at_least` of them: what the
  // window holds there already, else `read_size` bytes (at most kWindowMax, at least
  // `at_least`, never past the end) read into it. From memory: everything up to the end.
  static constexpr std::size_t kWindowMax = 128 << 10;
  Bytes window_at(std::uint64_t offset, std::size_t at_least, std::size_t read_size);

  // Copies [offset, offset + length) into `out` (the scan's large reads). Throws as view does.
  void read(std::uint64_t offset, std::size_t length, std::uint8_t* out) const;

  // Many small reads at once (a walk's container and entry headers). From a file they go
  // through io_uring where the kernel allows it: a system call per batch of 256 instead of
  // one per read, which on the hosts measured (bench/inspect) made libcublasLt's 8,500 header
  // reads 4x faster. Where io_uring is refused (seccomp, old kernels), pread one by one.
  struct BatchRead {
    std::uint64_t offset = 0;
    std::uint32_t length = 0;
    std::uint8_t* out = nullptr;
  };
  // Every read must lie within the input (Malformed otherwise, before anything is read).
  void read_batch(std::span<const BatchRead> reads);
  // Whether read_batch may use io_uring (default yes): off, every reader reads as where the
  // kernel refuses it. For tests of that path.
  static void allow_io_uring(bool allowed);

  // An io_uring (byte_reader.cpp). A reader's is taken from the rings other readers are done
  // with where there is one, and given back for the next; a ring serves one thread at a time.
  struct Ring;

 private:
  ByteReader() = default;
  Bytes memory_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::unique_ptr<Ring> ring_;
  bool ring_refused_ = false;
  std::vector<std::uint8_t> window_;
  std::uint64_t window_offset_ = 0;
  std::size_t window_length_ = 0;
};

}  // namespace archbuild::binary
