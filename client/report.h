// What a benchmark run produced, and the report made of it by client/report_spec.json: every
// case's columns (results.csv, results.json), the codelab's tables with their charts, and the
// lines around them. The renderers (render.h) only lay these out as text, CSV/JSON or HTML.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "attention/v1/attention.pb.h"
#include "attn/records.h"
#include "client/svg_chart.h"
#include "client/text_table.h"

namespace attn::client {

namespace v1 = ::attention::v1;

// One case as it came back, with the replica (gRPC peer address) that served it.
struct CaseRecord {
  v1::CaseResult result;
  std::string replica;
};

struct Report {
  std::string command;  // "attn-client bench --suite codelab"
  std::string target;   // as given to --target
  std::string created;  // ISO 8601 UTC
  double wall_seconds = 0;
  v1::ServerInfo server;  // GetServerInfo from the first replica that answered
  v1::BenchmarkOptions options;
  std::vector<CaseRecord> cases;  // in case index order
};

// A case's status as the server sent it (CaseResult.status, a google.rpc.Code number).
absl::StatusCode StatusOf(const v1::CaseResult& r);
bool IsOk(const v1::CaseResult& r);
// FAILED_PRECONDITION: the backend cannot run the case on that device ("n/a" in tables).
bool IsUnsupported(const v1::CaseResult& r);

// Counts for the summary line and the exit code: unsupported (IsUnsupported), and failed:
// any other non-OK status.
struct Tally {
  int ok = 0, unsupported = 0, failed = 0;
};
Tally Count(const std::vector<CaseRecord>& cases);

// One of the spec's labels ("series", "problem", "median") of a case.
std::string CaseLabel(const CaseRecord& record, const std::string& label);

// results.json: {"schema", "command", "target", "created", "wall_seconds", "server",
// "options", "summary", "cases": [a row per case]}, the values as the spec's columns give them.
Json ReportDocument(const Report& report);
// The case columns results.csv and results.json carry, in order.
std::vector<std::string> CaseColumnNames();

// One of the report's tables, and its chart when the spec gives it one.
struct ReportTable : TextTable {
  std::string key;  // what attn_client's Results.table() finds it by
  std::optional<LineChart> lines;
  std::optional<BarChart> bars;
};

// The tables in the report's order: those before the sections (the default shape's timing),
// then each section's (in the order sections first appear) followed by the tables that go
// under it (numerics of a checked sweep, the causal effect, FP8).
std::vector<ReportTable> ReportTables(const Report& report);
// The tables the HTML report adds at its end (every case).
std::vector<ReportTable> AppendixTables(const Report& report);

// "server: attn-server 0.1.0 on HOST (DEVICES, cuDNN ...)"; empty when no server answered.
std::string ServerLine(const Report& report);
// "16 cases: 14 ok, 1 unsupported, 1 failed in 12.50 s. Times are ...".
std::string SummaryLine(const Report& report);
// "served by: HOST (PEER) N; ..." over the cases that name their replica; empty if none does.
std::string ServedByLine(const Report& report);

}  // namespace attn::client
