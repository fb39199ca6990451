// Helpers shared by the harnesses. A harness feeds arbitrary bytes to one
// reader and returns 0; what it must never see is a crash, a hang, a leak or
// undefined behaviour (ASan and UBSan abort on those, libFuzzer on timeouts).
#pragma once

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ek::fuzz {

inline std::string_view Bytes(const uint8_t* data, size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

// Splits `in` at every `sep` (the separator is not kept); at most `max` parts,
// the last holding the rest.
inline std::vector<std::string_view> Split(std::string_view in, std::string_view sep, size_t max) {
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < max) {
    size_t at = in.find(sep);
    if (at == std::string_view::npos) break;
    parts.push_back(in.substr(0, at));
    in.remove_prefix(at + sep.size());
  }
  parts.push_back(in);
  return parts;
}

// One private directory per process (fuzzers run one input at a time), made
// on first use under $TMPDIR and removed at a normal exit; harnesses unlink
// what they write in it after each input.
inline const std::string& ScratchDir() {
  struct Dir {
    std::string path;
    Dir() {
      const char* tmp = getenv("TMPDIR");
      path = std::string(tmp && *tmp ? tmp : "/tmp") + "/ek-fuzz-XXXXXX";
      if (!mkdtemp(path.data())) abort();  // the harness's own environment, not input
    }
    ~Dir() { ::rmdir(path.c_str()); }
  };
  static const Dir dir;
  return dir.path;
}

// Writes `bytes` to `path` (truncating); aborts only when the harness's own
// scratch space fails, never on input.
inline void WriteWhole(const std::string& path, std::string_view bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) abort();
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) abort();
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

// A harness's own invariant failed (the input itself was fine to give): says
// which and traps, so libFuzzer keeps the input as a crash.
[[noreturn]] inline void Fail(const char* what, std::string_view detail = {}) {
  fprintf(stderr, "fuzz invariant failed: %s%s%.*s\n", what, detail.empty() ? "" : ": ",
          static_cast<int>(detail.size()), detail.data());
  __builtin_trap();
}

}  // namespace ek::fuzz
