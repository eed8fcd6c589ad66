#include "client/text_table.h"

#include <algorithm>

namespace attn::client {

size_t DisplayWidth(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xc0) != 0x80;
  return n;
}

std::string TextTable::Render() const {
  std::vector<size_t> width(headers.size(), 0);
  for (size_t i = 0; i < headers.size(); ++i) width[i] = DisplayWidth(headers[i]);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) {
      width[i] = std::max(width[i], DisplayWidth(row[i]));
    }
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t i = 0; i < width.size(); ++i) {
      const std::string cell = i < cells.size() ? cells[i] : "";
      const std::string pad(width[i] - std::min(width[i], DisplayWidth(cell)), ' ');
      const bool right = i < right_aligned.size() && right_aligned[i];
      if (i > 0) out += "  ";
      out += right ? pad + cell : (i + 1 < width.size() ? cell + pad : cell);
    }
    return out + "\n";
  };
  std::string out;
  if (!title.empty()) out += title + "\n";
  out += line(headers);
  size_t total = 0;
  for (size_t w : width) total += w;
  total += width.empty() ? 0 : 2 * (width.size() - 1);
  std::string rule;
  for (size_t i = 0; i < total; ++i) rule += "─";
  out += rule + "\n";
  for (const auto& row : rows) out += line(row);
  for (const auto& note : notes) out += note + "\n";
  return out;
}

}  // namespace attn::client
