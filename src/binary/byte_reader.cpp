#include "binary/byte_reader.hpp"

#include "binary/open_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <liburing.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <mutex>
#include <vector>

namespace archbuild::binary {

namespace {

// A container header with its first entry header (16 + 64) and then some: one read.
constexpr std::size_t kWindow = 256;

}  // namespace

struct ByteReader::Ring {
  io_uring ring{};
  bool ok = false;
  explicit Ring(unsigned entries) { ok = io_uring_queue_init(entries, &ring, 0) == 0; }
  ~Ring() {
    if (ok) io_uring_queue_exit(&ring);
  }
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;
};

namespace {
// Reads per submission: enough that the system call is negligible, small enough that the
// ring's memory (a few pages) costs nothing to set up.
constexpr unsigned kRingEntries = 256;
std::atomic<bool> io_uring_allowed{true};

// Rings that readers are done with, for the next reader to take. Setting one up took ~0.2 ms on
// the hosts measured (bench/inspect), and tearing one down ~0.25 ms (the unmapping of its
// memory), which every inspect of a library paid once per reader thread. So a ring is never torn
// down but where it failed: the pool holds at most as many as readers ever read in batches at
// once, and the process's exit closes them (as part of its own unmapping, at no extra cost).
// Never destroyed: a static destructor would tear the rings down at exit after all.
class RingPool {
 public:
  static RingPool& get() {
    static RingPool* pool = new RingPool;
    return *pool;
  }
  std::unique_ptr<ByteReader::Ring> take() {
    std::lock_guard lock(mutex_);
    if (free_.empty()) return nullptr;
    auto r = std::move(free_.back());
    free_.pop_back();
    return r;
  }
  // `ring` has no read in flight and no completion left (read_batch reaps them all).
  void give_back(std::unique_ptr<ByteReader::Ring> ring) {
    if (!ring) return;
    std::lock_guard lock(mutex_);
    free_.push_back(std::move(ring));
  }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<ByteReader::Ring>> free_;
};
}  // namespace

void ByteReader::allow_io_uring(bool allowed) { io_uring_allowed = allowed; }

ByteReader::ByteReader(Bytes memory) : memory_(memory), size_(memory.size()) {}

Result<ByteReader> ByteReader::open(const std::filesystem::path& path) {
  auto opened = open_regular_file(path);
  if (!opened) return opened.error();
  ByteReader r;
  r.fd_ = opened->fd;
  r.size_ = opened->size;
  return r;
}

Result<ByteReader> ByteReader::sibling() const {
  if (fd_ < 0) return ByteReader(memory_);
  int fd = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return Error::bad_input(fmt::format("cannot duplicate a file descriptor: {}", std::strerror(errno)));
  ByteReader r;
  r.fd_ = fd;
  r.size_ = size_;
  return r;
}

ByteReader::ByteReader(ByteReader&& other) noexcept
    : memory_(other.memory_),
      fd_(other.fd_),
      size_(other.size_),
      ring_(std::move(other.ring_)),
      ring_refused_(other.ring_refused_),
      window_(std::move(other.window_)),
      window_offset_(other.window_offset_),
      window_length_(other.window_length_) {
  other.fd_ = -1;
  other.window_length_ = 0;
}

ByteReader& ByteReader::operator=(ByteReader&& other) noexcept {
  if (this != &other) {
    RingPool::get().give_back(std::move(ring_));
    if (fd_ >= 0) ::close(fd_);
    memory_ = other.memory_;
    fd_ = other.fd_;
    size_ = other.size_;
    ring_ = std::move(other.ring_);
    ring_refused_ = other.ring_refused_;
    window_ = std::move(other.window_);
    window_offset_ = other.window_offset_;
    window_length_ = other.window_length_;
    other.fd_ = -1;
    other.window_length_ = 0;
  }
  return *this;
}

ByteReader::~ByteReader() {
  RingPool::get().give_back(std::move(ring_));  // its reads name their descriptor: any reader can use it
  if (fd_ >= 0) ::close(fd_);
}

void ByteReader::read(std::uint64_t offset, std::size_t length, std::uint8_t* out) const {
  if (!fits(offset, length, size_))
    throw Malformed(fmt::format("range of {} bytes at offset {} runs past the end of the data", length, offset));
  if (fd_ < 0) {
    std::memcpy(out, memory_.data() + offset, length);
    return;
  }
  while (length > 0) {
    ssize_t n = ::pread(fd_, out, length, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw Malformed(fmt::format("cannot read {} bytes at offset {}: {}", length, offset,
                                  n < 0 ? std::strerror(errno) : "the file is shorter than it was"));
    out += n;
    offset += static_cast<std::uint64_t>(n);
    length -= static_cast<std::size_t>(n);
  }
}

void ByteReader::read_batch(std::span<const BatchRead> reads) {
  for (const auto& r : reads)
    if (!fits(r.offset, r.length, size_))
      throw Malformed(fmt::format("range of {} bytes at offset {} runs past the end of the data", r.length, r.offset));
  if (fd_ < 0 || reads.size() < 2 || ring_refused_ || !io_uring_allowed) {
    for (const auto& r : reads) read(r.offset, r.length, r.out);
    return;
  }
  if (!ring_) ring_ = RingPool::get().take();
  if (!ring_) {
    auto ring = std::make_unique<Ring>(kRingEntries);
    if (!ring->ok) {
      ring_refused_ = true;
      for (const auto& r : reads) read(r.offset, r.length, r.out);
      return;
    }
    ring_ = std::move(ring);
  }
  io_uring* ring = &ring_->ring;
  for (std::size_t first = 0; first < reads.size(); first += kRingEntries) {
    const std::size_t n = std::min<std::size_t>(kRingEntries, reads.size() - first);
    for (std::size_t i = first; i < first + n; ++i) {
      io_uring_sqe* sqe = io_uring_get_sqe(ring);  // the ring has room: it was drained
      io_uring_prep_read(sqe, fd_, reads[i].out, reads[i].length, reads[i].offset);
      // user_data directly, not io_uring_sqe_set_data64/io_uring_cqe_get_data64: those came
      // with liburing 2.2, and the bundle is built against Debian 11's liburing 0.7.
      sqe->user_data = i;
    }
    int submitted = io_uring_submit_and_wait(ring, static_cast<unsigned>(n));
    if (submitted < 0 && submitted != -EINTR) {
      // Refused at the first submission (a seccomp filter can allow setup and not this): the
      // queued reads are dropped with the ring, and every read goes through pread from now on.
      ring_.reset();
      ring_refused_ = true;
      for (std::size_t i = first; i < reads.size(); ++i) read(reads[i].offset, reads[i].length, reads[i].out);
      return;
    }
    // Every completion of the submission is reaped before an error is raised: the ring serves
    // this reader's next batch, which must not take this one's completions for its own, and no
    // read still in flight may write into buffers that the caller frees as the error unwinds.
    std::exception_ptr failed;
    for (std::size_t pending = n; pending > 0;) {
      io_uring_cqe* cqe = nullptr;
      if (io_uring_peek_cqe(ring, &cqe) != 0) {
        int w = io_uring_submit_and_wait(ring, 1);
        if (w < 0 && w != -EINTR) {
          // What is in flight can no longer be waited for: the ring is closed (the kernel
          // cancels its reads) and this reader reads with pread from now on.
          ring_.reset();
          ring_refused_ = true;
          throw Malformed(fmt::format("cannot read the file: io_uring: {}", std::strerror(-w)));
        }
        continue;
      }
      const auto& r = reads[static_cast<std::size_t>(cqe->user_data)];
      const int res = cqe->res;
      io_uring_cqe_seen(ring, cqe);
      --pending;
      // A failed or short read (EINTR, EAGAIN, a file that shrank) is finished with pread,
      // which retries or raises the error as one read alone would.
      const std::uint32_t done = res > 0 ? static_cast<std::uint32_t>(res) : 0;
      if (done < r.length && !failed) {
        try {
          read(r.offset + done, r.length - done, r.out + done);
        } catch (...) {
          failed = std::current_exception();
        }
      }
    }
    if (failed) std::rethrow_exception(failed);
  }
}

Bytes ByteReader::window_at(std::uint64_t offset, std::size_t at_least, std::size_t read_size) {
  if (!fits(offset, at_least, size_))
    throw Malformed(fmt::format("read past the end of the data at offset {}", offset));
  if (fd_ < 0) return memory_.subspan(static_cast<std::size_t>(offset));
  if (offset < window_offset_ || offset + at_least > window_offset_ + window_length_) {
    read_size = std::min(std::max(read_size, at_least), kWindowMax);
    std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(read_size, size_ - offset));
    if (window_.size() < want) window_.resize(want < kWindow ? kWindow : kWindowMax);
    window_length_ = 0;
    read(offset, want, window_.data());
    window_offset_ = offset;
    window_length_ = want;
  }
  return Bytes(window_.data() + (offset - window_offset_), window_length_ - (offset - window_offset_));
}

Bytes ByteReader::view(std::uint64_t offset, std::size_t length) {
  if (fd_ >= 0 && length > kViewMax)
    throw Malformed(fmt::format("view of {} bytes is over the limit of {}", length, kViewMax));
  return window_at(offset, length, std::max(length, kWindow)).first(length);
}

}  // namespace archbuild::binary
