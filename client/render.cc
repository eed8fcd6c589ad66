// The terminal's tables, results.csv and results.json.
#include "client/render.h"

namespace attn::client {

std::string RenderTables(const Report& report) {
  std::string out;
  if (const std::string line = ServerLine(report); !line.empty()) out += line + "\n\n";
  for (const ReportTable& t : ReportTables(report)) out += t.Render() + "\n";
  out += SummaryLine(report) + "\n";
  if (const std::string line = ServedByLine(report); !line.empty()) out += line + "\n";
  return out;
}

std::string RenderCsv(const Report& report) {
  const Json doc = ReportDocument(report);
  return RecordsCsv(CaseColumnNames(), doc.at("cases").get<std::vector<Json>>());
}

std::string RenderJson(const Report& report) {
  return RecordsJson(ReportDocument(report), 2) + "\n";
}

}  // namespace attn::client
