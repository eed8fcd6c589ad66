// Tokens files for the server's tests: a participant's line and the file written as attn-server
// accepts it (server/auth.h).
#pragma once

#include <sys/stat.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/auth.h"

namespace attn::testing {

inline std::string Hex(const std::array<uint8_t, 32>& bytes) {
  std::string out;
  for (uint8_t b : bytes) absl::StrAppend(&out, absl::Hex(b, absl::kZeroPad2));
  return out;
}

// A tokens-file line for `name` with `token` (its SHA-256), then `rest` (role, key=value ...).
inline std::string TokensLine(const std::string& name, const std::string& token,
                              const std::string& rest = "") {
  return absl::StrCat(name, " ", Hex(server::Sha256(token)), rest.empty() ? "" : " ", rest, "\n");
}

// Writes `text` to `path` with `mode` (0600: the server refuses a file others can read),
// replacing it in one rename as a Secret update swaps the file.
inline void WriteTokensFile(const std::string& path, const std::string& text, mode_t mode = 0600) {
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp) << text;
  chmod(tmp.c_str(), mode);
  std::rename(tmp.c_str(), path.c_str());
}

}  // namespace attn::testing
