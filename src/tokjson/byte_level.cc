#include "tokjson/byte_level.h"

#include <algorithm>
#include <cstdint>
#include <iterator>

#include "core/utf8.h"

namespace ek::tokjson {
namespace {

// The table's code points are all below U+0200: the bytes that print as
// themselves keep their value, the other 68 take 256, 257, ... in byte order.
struct ByteTable {
  int16_t cp_to_byte[512];
  ByteTable() {
    std::fill(std::begin(cp_to_byte), std::end(cp_to_byte), -1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      int cp = keep ? b : 256 + n++;
      cp_to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteTable& Bytes() {
  static const ByteTable t;
  return t;
}

}  // namespace

bool ByteLevelToBytes(std::string_view s, std::string* out) {
  // Every character stands for one byte, so the bytes are at most s.size(): written
  // through a pointer (the loader decodes every vocabulary key and merge).
  const ByteTable& table = Bytes();
  out->resize(s.size());
  char* o = out->data();
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char b = p[i];
    if (b >= '!' && b <= '~') {  // prints as itself: the commonest
      *o++ = static_cast<char>(b);
      ++i;
      continue;
    }
    uint32_t cp;
    i += DecodeUtf8(p + i, &cp);
    if (cp >= 512 || table.cp_to_byte[cp] < 0) {
      out->clear();
      return false;
    }
    *o++ = static_cast<char>(table.cp_to_byte[cp]);
  }
  out->resize(static_cast<size_t>(o - out->data()));
  return true;
}

std::string ByteLevelDecode(std::string_view s) {
  std::string out;
  if (ByteLevelToBytes(s, &out)) return out;
  return std::string(s);
}

}  // namespace ek::tokjson
