// The outputs of a benchmark run, laid out from the report (report.h): the codelab's tables for
// the terminal, CSV and JSON of every case, and a self-contained HTML report with SVG charts.
// Pure functions of the Report, so tests compare them with golden files.
#pragma once

#include <string>

#include "client/report.h"

namespace attn::client {

// The server line, the report's tables (ReportTables) and the summary lines.
std::string RenderTables(const Report& report);

// results.csv: one header row (CaseColumnNames), then one row per case (attn/records.h's rules).
std::string RenderCsv(const Report& report);

// results.json: ReportDocument indented by two spaces (attn/records.h's rules).
std::string RenderJson(const Report& report);

// One HTML page, no external assets: the run's facts, then every table of the report with its
// chart, then the appendix (every case).
std::string RenderHtml(const Report& report);

}  // namespace attn::client
