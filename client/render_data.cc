// CSV and JSON: the same columns per case, for spreadsheets and scripts. Every value goes through
// one JSON library (nlohmann-json); the CSV is written from the same values per RFC 4180.
#include <cmath>
#include <cstdlib>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "client/render.h"

namespace attn::client {
namespace {

// Numbers with the 6 significant digits the tables use; integral values stay integers; NaN and
// infinities (never sent, but possible in a file) become null.
Json Number(double v) {
  if (!std::isfinite(v)) return nullptr;
  const double rounded = std::strtod(absl::StrFormat("%.6g", v).c_str(), nullptr);
  if (rounded == std::trunc(rounded) && std::fabs(rounded) < 1e15) {
    return static_cast<int64_t>(rounded);
  }
  return rounded;
}

// One CSV field (RFC 4180): strings quoted with '"' doubled (commas, quotes and line breaks
// stay inside the quotes), null empty, numbers and booleans as JSON writes them.
std::string CsvField(const Json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) {
    return absl::StrCat("\"", absl::StrReplaceAll(v.get<std::string>(), {{"\"", "\"\""}}), "\"");
  }
  return DumpJson(v);
}

}  // namespace

std::string DumpJson(const Json& value, int indent) {
  // Invalid UTF-8 (a server's message, a peer name) becomes U+FFFD: the document stays valid.
  return value.dump(indent, ' ', false, Json::error_handler_t::replace);
}

std::vector<std::pair<std::string, Json>> CaseColumns(const CaseRecord& record) {
  const v1::CaseResult& r = record.result;
  const v1::BenchmarkCase& c = r.case_();
  const v1::Shape& s = c.shape();
  const v1::LatencyStats& st = r.stats();
  std::vector<std::pair<std::string, Json>> columns = {
      {"index", r.index()},
      {"section", c.section()},
      {"requested_backend", c.backend().empty() ? "auto" : c.backend()},
      {"backend", r.backend()},
      {"dtype", DTypeLabel(c.dtype())},
      {"B", s.batch()},
      {"T", s.q_len()},
      {"S", KvLen(s)},
      {"N", s.num_heads()},
      {"K", KvHeads(s)},
      {"H", s.head_dim()},
      {"causal", c.causal()},
      {"status", StatusName(r)},
      {"message", r.message()},
      {"seed", r.seed()},
      {"repeats", st.count()},
      {"min_ms", Number(st.min_ms())},
      {"median_ms", Number(st.median_ms())},
      {"mean_ms", Number(st.mean_ms())},
      {"p10_ms", Number(st.p10_ms())},
      {"p90_ms", Number(st.p90_ms())},
      {"p99_ms", Number(st.p99_ms())},
      {"stddev_ms", Number(st.stddev_ms())},
      {"budget_cut", r.budget_cut()},
      {"tflops", Number(r.tflops())},
      {"gbps", Number(r.gbps())},
      {"workspace_bytes", r.workspace_bytes()},
      {"peak_arena_bytes", r.peak_arena_bytes()},
      {"timing", r.timing()},
      {"input_sets", r.input_sets()},
      {"max_abs_error", Number(r.max_abs_error())},
      {"rel_l2_error", Number(r.rel_l2_error())},
      {"numerics", r.numerics()},
      {"causal_first_diff", Number(r.causal_first_diff())},
      {"causal_last_diff", Number(r.causal_last_diff())},
      {"device", r.device()},
      {"device_name", r.device_name()},
      {"hostname", r.hostname()},
      {"replica", record.replica},
  };
  // FP8 cases: the recipe state after the case's last call; null for the others.
  const bool fp8 = r.has_fp8();
  const v1::Fp8Report& f = r.fp8();
  auto fp8_num = [&](double v) { return fp8 ? Number(v) : Json(nullptr); };
  columns.push_back({"fp8_recipe", fp8 ? Json(f.recipe()) : Json(nullptr)});
  const std::pair<const char*, const v1::Fp8Values*> groups[] = {
      {"fp8_scale_", &f.scales_used()},
      {"fp8_amax_", &f.amaxes_seen()},
      {"fp8_next_scale_", &f.next_scales()}};
  for (const auto& [prefix, values] : groups) {
    for (const auto& [tensor, v] : {std::pair<const char*, double>{"q", values->q()},
                                    {"k", values->k()},
                                    {"v", values->v()},
                                    {"s", values->s()},
                                    {"o", values->o()}}) {
      columns.push_back({absl::StrCat(prefix, tensor), fp8_num(v)});
    }
  }
  columns.push_back({"fp8_calls_recorded", fp8 ? Json(f.calls_recorded()) : Json(nullptr)});
  columns.push_back({"fp8_quantize_ms", fp8_num(f.quantize_ms())});
  columns.push_back({"fp8_max_diff_vs_cudnn", fp8_num(f.max_diff_vs_cudnn())});
  return columns;
}

std::string RenderCsv(const Report& report) {
  std::string out;
  const auto header = CaseColumns(CaseRecord{});
  for (size_t i = 0; i < header.size(); ++i) absl::StrAppend(&out, i ? "," : "", header[i].first);
  out += "\r\n";
  for (const auto& record : report.cases) {
    const auto columns = CaseColumns(record);
    for (size_t i = 0; i < columns.size(); ++i) {
      absl::StrAppend(&out, i ? "," : "", CsvField(columns[i].second));
    }
    out += "\r\n";
  }
  return out;
}

std::string RenderJson(const Report& report) {
  const v1::ServerInfo& info = report.server;
  const v1::BenchmarkOptions& o = report.options;
  const Tally tally = Count(report.cases);
  Json devices = Json::array();
  for (const auto& d : info.devices()) {
    devices.push_back({{"index", d.index()},
                       {"kind", d.kind()},
                       {"name", d.name()},
                       {"compute_capability", d.compute_capability()}});
  }
  // Each backend's capabilities once (the verdicts repeat them per device and dtype).
  Json backends = Json::array();
  std::set<std::string> seen;
  for (const auto& v : info.backends()) {
    if (!seen.insert(v.backend()).second) continue;
    backends.push_back({{"name", v.backend()},
                        {"takes_fp8_recipe", v.takes_fp8_recipe()},
                        {"full_precision_peer", v.full_precision_peer()}});
  }
  Json doc;
  doc["schema"] = "attn.bench.v1";
  doc["command"] = report.command;
  doc["target"] = report.target;
  doc["created"] = report.created;
  doc["wall_seconds"] = Number(report.wall_seconds);
  doc["server"] = {{"version", info.version()},
                   {"hostname", info.hostname()},
                   {"cuda_runtime_version", info.cuda_runtime_version()},
                   {"cuda_driver_version", info.cuda_driver_version()},
                   {"cudnn_version", info.cudnn_version()},
                   {"cpu_fallback", info.cpu_fallback()},
                   {"devices", devices},
                   {"backends", backends}};
  doc["options"] = {{"warmup", o.has_warmup() ? Json(o.warmup()) : Json(nullptr)},
                    {"repeats", o.has_repeats() ? Json(o.repeats()) : Json(nullptr)},
                    {"case_budget_seconds",
                     o.has_case_budget_seconds() ? Number(o.case_budget_seconds()) : Json(nullptr)},
                    {"seed", o.seed()},
                    {"cuda_graph", o.cuda_graph()},
                    {"check_numerics", o.check_numerics()}};
  doc["summary"] = {{"cases", report.cases.size()},
                    {"ok", tally.ok},
                    {"unsupported", tally.unsupported},
                    {"failed", tally.failed}};
  Json cases = Json::array();
  for (const auto& record : report.cases) {
    Json row = Json::object();
    for (auto& [name, value] : CaseColumns(record)) row[name] = std::move(value);
    cases.push_back(std::move(row));
  }
  doc["cases"] = std::move(cases);
  return DumpJson(doc, 2) + "\n";
}

}  // namespace attn::client
