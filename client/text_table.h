// An aligned plain-text table with a title, as the codelab's show_table prints them.
#pragma once

#include <string>
#include <vector>

namespace attn::client {

struct TextTable {
  std::string title;
  std::vector<std::string> headers;
  std::vector<bool> right_aligned;  // per column; missing entries are left-aligned
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> notes;  // lines printed under the table

  // Title, header, a rule, the rows and the notes, each line ending in '\n'. Widths count
  // UTF-8 code points, so "—" and "|" align alike.
  std::string Render() const;
};

// Display width of a UTF-8 string in code points.
size_t DisplayWidth(const std::string& s);

}  // namespace attn::client
