#include "packfile/layout.h"

#include <fmt/core.h>

namespace ek::pack {

Result<DocsCounts> CheckDocEntries(std::string_view bytes, uint64_t blocks, int seq_len,
                                   const std::string& file) {
  if (bytes.size() % kDocEntryBytes != 0) {
    return CorruptError(fmt::format(
        "{}: {} bytes is not a whole number of {}-byte entries (a partial entry at byte {})", file,
        bytes.size(), kDocEntryBytes, bytes.size() - bytes.size() % kDocEntryBytes));
  }
  const uint64_t seq = static_cast<uint64_t>(seq_len);
  const uint64_t tokens = blocks * seq;
  DocsCounts c;
  c.entries = bytes.size() / kDocEntryBytes;
  uint64_t prev = 0;
  bool have_prev = false, pad_open = false;  // pad_open: the previous entry began padding
  for (uint64_t i = 0; i < c.entries; ++i) {
    const uint64_t e = DocEntryAt(bytes, i), off = EntryOffset(e);
    auto bad = [&](const std::string& what) {
      return CorruptError(fmt::format("{}: byte {}: entry {} ({}{}): {}", file, i * kDocEntryBytes,
                                      i, off, IsPadEntry(e) ? ", padding" : "", what));
    };
    if (off >= tokens) {
      return bad(fmt::format("offset beyond the rank's {} tokens ({} blocks x {})", tokens, blocks,
                             seq_len));
    }
    if (have_prev && off <= prev) {
      return bad(fmt::format("not after the previous entry's offset {} (entries ascend)", prev));
    }
    if (pad_open && off / seq == prev / seq) {
      return bad(
          fmt::format("inside the padding that begins at {} (padding runs to the block's "
                      "end)",
                      prev));
    }
    if (IsPadEntry(e)) {
      if (off % seq == 0) return bad("padding at a block's start (a block of padding only)");
      ++c.pads;
      c.padding_tokens += seq - off % seq;
    } else {
      ++c.documents;
    }
    pad_open = IsPadEntry(e);
    prev = off;
    have_prev = true;
  }
  return c;
}

}  // namespace ek::pack
