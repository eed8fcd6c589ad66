// The self-contained HTML report: inline CSS and SVG, no scripts, no external assets.
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "client/render.h"
#include "client/svg_chart.h"

namespace attn::client {
namespace {

std::string Table(const std::vector<std::string>& headers,
                  const std::vector<std::vector<std::string>>& rows,
                  const std::set<size_t>& numeric_columns = {}) {
  std::string out = "<table>\n<tr>";
  for (size_t i = 0; i < headers.size(); ++i) {
    absl::StrAppend(&out, numeric_columns.count(i) ? "<th class=\"num\">" : "<th>",
                    HtmlEscape(headers[i]), "</th>");
  }
  out += "</tr>\n";
  for (const auto& row : rows) {
    out += "<tr>";
    for (size_t i = 0; i < row.size(); ++i) {
      absl::StrAppend(&out, numeric_columns.count(i) ? "<td class=\"num\">" : "<td>",
                      HtmlEscape(row[i]), "</td>");
    }
    out += "</tr>\n";
  }
  return out + "</table>\n";
}

// A report table as a section: its title, its chart, the table and the notes under it.
std::string Section(const ReportTable& t) {
  std::set<size_t> numeric;
  for (size_t i = 0; i < t.right_aligned.size(); ++i) {
    if (t.right_aligned[i]) numeric.insert(i);
  }
  std::string why;
  for (const std::string& note : t.notes) {
    absl::StrAppend(&why, "<li>", HtmlEscape(std::string(absl::StripAsciiWhitespace(note))),
                    "</li>");
  }
  return absl::StrCat(
      "<section>\n<h2>", HtmlEscape(t.title), "</h2>\n", t.lines ? t.lines->Render() : "",
      t.bars ? t.bars->Render() : "", Table(t.headers, t.rows, numeric),
      why.empty() ? "" : absl::StrCat("<ul class=\"why\">", why, "</ul>\n"), "</section>\n");
}

constexpr char kStyle[] = R"(<style>
body { font-family: sans-serif; margin: 24px auto; max-width: 1000px; color: #1f2328; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; }
table { border-collapse: collapse; margin: 8px 0 12px 0; font-size: 13px; }
th { text-align: left; border-bottom: 1px solid #d0d7de; padding: 5px 8px; }
td { border-bottom: 1px solid #eef1f4; padding: 5px 8px; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
.meta td:first-child { color: #57606a; }
.why { color: #57606a; font-size: 13px; }
svg { display: block; max-width: 100%; height: auto; }
</style>
)";

}  // namespace

std::string RenderHtml(const Report& report) {
  const v1::ServerInfo& info = report.server;
  const Tally tally = Count(report.cases);
  std::string devices;
  for (const auto& d : info.devices())
    absl::StrAppend(&devices, devices.empty() ? "" : ", ", d.name());
  std::vector<std::vector<std::string>> meta = {
      {"Command", report.command},
      {"Target", report.target},
      {"Created", report.created},
      {"Server", absl::StrCat("attn-server ", info.version(), " on ", info.hostname())},
      {"Devices", devices.empty() ? "-" : devices},
      {"CUDA / cuDNN",
       absl::StrCat(info.cuda_runtime_version() ? absl::StrCat(info.cuda_runtime_version()) : "-",
                    " / ", info.cudnn_version().empty() ? "-" : info.cudnn_version())},
      {"Cases", absl::StrFormat("%d: %d ok, %d unsupported, %d failed, in %.1f s",
                                static_cast<int>(report.cases.size()), tally.ok, tally.unsupported,
                                tally.failed, report.wall_seconds)},
      {"Timing", report.cases.empty() ? "-"
                                      : report.cases.front().result.timing() +
                                            "; medians of device time per call; * the case "
                                            "budget cut its repeats"},
  };
  if (info.cpu_fallback()) meta.push_back({"Note", info.note()});
  std::string out = absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>attn "
      "benchmark "
      "report</title>\n",
      kStyle, "</head>\n<body>\n<h1>attn benchmark report</h1>\n<div class=\"meta\">",
      Table({"", ""}, meta), "</div>\n");
  for (const ReportTable& t : ReportTables(report)) out += Section(t);
  for (const ReportTable& t : AppendixTables(report)) out += Section(t);
  return out + "</body>\n</html>\n";
}

}  // namespace attn::client
