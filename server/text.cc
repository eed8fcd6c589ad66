#include "server/text.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace attn::server {

bool IsName(absl::string_view text, size_t max_bytes) {
  if (text.empty() || text.size() > max_bytes) return false;
  return std::all_of(text.begin(), text.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

bool IsPrintableUtf8(absl::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = p + text.size();
  while (p < end) {
    const unsigned char c = *p;
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f) return false;
      ++p;
      continue;
    }
    int n = 0;
    uint32_t cp = 0;
    if ((c & 0xe0) == 0xc0) {
      n = 1;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (end - p <= n) return false;
    for (int i = 1; i <= n; ++i) {
      if ((p[i] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (p[i] & 0x3f);
    }
    static constexpr uint32_t kLeast[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kLeast[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) ||
        (cp >= 0x80 && cp <= 0x9f)) {
      return false;
    }
    p += n + 1;
  }
  return true;
}

std::string Quoted(absl::string_view text) {
  constexpr size_t kShown = 48;
  std::string out = "'";
  for (char c : text.substr(0, kShown)) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || c == '\\' || c == '\'') {
      absl::StrAppend(&out, absl::StrFormat("\\x%02x", u));
    } else {
      out += c;
    }
  }
  out += "'";
  if (text.size() > kShown) absl::StrAppend(&out, "... (", text.size(), " bytes)");
  return out;
}

}  // namespace attn::server
