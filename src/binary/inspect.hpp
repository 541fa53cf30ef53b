// What device code a file, a wheel (or any zip) or a directory carries: one FileReport per
// ELF file. Reads only; a zip member is read in memory and its name is never used as a path.
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "arch/compat.hpp"
#include "binary/bytes.hpp"
#include "binary/fatbin.hpp"
#include "core/error.hpp"

namespace archbuild::binary {

struct InspectOptions {
  bool verify = false;  // decompress every entry and cross-check it (--verify)
  ScanMode scan = ScanMode::registered;  // full: the reference scan (tests)
  // Threads reading (0: one per core): one file's large data sections in parts, or a
  // directory's files, each of those then on one thread.
  unsigned threads = 0;
  VerifyOptions verify_options;
  // Largest zip member read into memory (libtorch_cuda.so is ~1.5 GB in CUDA 13 wheels).
  std::uint64_t max_member_size = std::uint64_t{8} << 30;
};

struct VerifyProblem {
  std::uint64_t offset = 0;  // of the entry header
  std::string image;         // "sm_90a"
  std::string message;
};

// Distinct images of one placement, with how many entries carry each.
struct ImageCount {
  EntryKind kind = EntryKind::sass;
  int sm = 0;
  arch::Variant variant = arch::Variant::none;
  std::size_t count = 0;
  std::map<Compression, std::size_t> compression;  // entries per compression
  std::string name() const { return image_name(kind, sm, variant); }
};

struct FileReport {
  std::string path;     // FILE, or ARCHIVE!MEMBER for a zip member
  std::string machine;  // "x86-64", "aarch64"
  std::vector<Container> containers;
  bool verified = false;                // --verify ran over every entry
  std::vector<VerifyProblem> problems;  // entries that do not match their headers
  std::size_t unchecked = 0;            // entries --verify could not check (encoded payloads)
  std::string unchecked_reason;         // why, for the first of them

  bool has_device_code() const;
  std::size_t entry_count() const;
  // Distinct images of the code loaded at run time (.nv_fatbin and embedded containers)…
  std::vector<ImageCount> runtime_images() const;
  // … and of the relocatable (-rdc) code, reported apart.
  std::vector<ImageCount> relocatable_images() const;
  // Entries per compression over every container.
  std::map<Compression, std::size_t> compression() const;
  // The SASS and PTX images loaded at run time, for arch::run_verdict.
  std::vector<arch::CodeImage> code_images() const;
};

struct Inspection {
  std::vector<FileReport> files;     // every ELF64 x86-64/aarch64 file, in path order
  std::vector<std::string> skipped;  // ELF files of another class or machine (cubins, 32-bit)
};

// One ELF file held in memory (or mapped). `file`, when given, reads the same file with pread:
// the containers are read through it (the mapping serves the ELF header, the section table
// and --verify). Errors: "PATH: what".
Result<FileReport> inspect_elf(Bytes data, const std::string& path, const InspectOptions& options = {},
                               ByteReader* file = nullptr);

// Every ELF member of a zip (a wheel) held in memory. Non-ELF members are skipped; a member
// whose name is absolute, has a `..` component, a backslash or a control character fails the
// whole archive, as does an archive without ELF members.
Result<Inspection> inspect_zip(Bytes data, const std::string& path, const InspectOptions& options = {});

// A file (ELF, wheel or zip) or a directory (every ELF file below it, in path order; symbolic
// links are not followed).
Result<Inspection> inspect_path(const std::filesystem::path& path, const InspectOptions& options = {});

// Whether a zip member name could escape the directory it would be extracted to.
bool unsafe_member_name(std::string_view name);

}  // namespace archbuild::binary
