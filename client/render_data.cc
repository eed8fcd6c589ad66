// CSV and JSON: the same columns per case, for spreadsheets and scripts.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/render.h"

namespace attn::client {
namespace {

std::string Num(double v) {
  if (!std::isfinite(v)) return "null";
  return absl::StrFormat("%.6g", v);
}

std::string Bool(bool b) { return b ? "true" : "false"; }

}  // namespace

std::string JsonQuote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::vector<std::pair<std::string, std::string>> CaseColumns(const CaseRecord& record) {
  const v1::CaseResult& r = record.result;
  const v1::BenchmarkCase& c = r.case_();
  const v1::Shape& s = c.shape();
  const v1::LatencyStats& st = r.stats();
  std::vector<std::pair<std::string, std::string>> columns = {
      {"index", absl::StrCat(r.index())},
      {"section", JsonQuote(c.section())},
      {"requested_backend", JsonQuote(c.backend().empty() ? "auto" : c.backend())},
      {"backend", JsonQuote(r.backend())},
      {"dtype", JsonQuote(DTypeLabel(c.dtype()))},
      {"B", absl::StrCat(s.batch())},
      {"T", absl::StrCat(s.q_len())},
      {"S", absl::StrCat(KvLen(s))},
      {"N", absl::StrCat(s.num_heads())},
      {"K", absl::StrCat(KvHeads(s))},
      {"H", absl::StrCat(s.head_dim())},
      {"causal", Bool(c.causal())},
      {"status", JsonQuote(r.status())},
      {"message", JsonQuote(r.message())},
      {"repeats", absl::StrCat(st.count())},
      {"min_ms", Num(st.min_ms())},
      {"median_ms", Num(st.median_ms())},
      {"mean_ms", Num(st.mean_ms())},
      {"p10_ms", Num(st.p10_ms())},
      {"p90_ms", Num(st.p90_ms())},
      {"p99_ms", Num(st.p99_ms())},
      {"stddev_ms", Num(st.stddev_ms())},
      {"budget_cut", Bool(r.budget_cut())},
      {"tflops", Num(r.tflops())},
      {"gbps", Num(r.gbps())},
      {"workspace_bytes", absl::StrCat(r.workspace_bytes())},
      {"peak_arena_bytes", absl::StrCat(r.peak_arena_bytes())},
      {"timing", JsonQuote(r.timing())},
      {"input_sets", absl::StrCat(r.input_sets())},
      {"max_abs_error", Num(r.max_abs_error())},
      {"rel_l2_error", Num(r.rel_l2_error())},
      {"numerics", JsonQuote(r.numerics())},
      {"causal_first_diff", Num(r.causal_first_diff())},
      {"causal_last_diff", Num(r.causal_last_diff())},
      {"device", absl::StrCat(r.device())},
      {"device_name", JsonQuote(r.device_name())},
      {"hostname", JsonQuote(r.hostname())},
      {"replica", JsonQuote(record.replica)},
  };
  // cudnn_fp8 cases: the recipe state after the case's last call; empty (null) for the others.
  const bool fp8 = r.has_fp8();
  const v1::Fp8Report& f = r.fp8();
  auto fp8_num = [&](double v) { return fp8 ? Num(v) : std::string("null"); };
  columns.push_back({"fp8_recipe", fp8 ? JsonQuote(f.recipe()) : "null"});
  const std::pair<const char*, const v1::Fp8Values*> groups[] = {
      {"fp8_scale_", &f.scales_used()}, {"fp8_amax_", &f.amaxes_seen()}, {"fp8_next_scale_", &f.next_scales()}};
  for (const auto& [prefix, values] : groups) {
    for (const auto& [tensor, v] : {std::pair<const char*, double>{"q", values->q()}, {"k", values->k()},
                                    {"v", values->v()}, {"s", values->s()}, {"o", values->o()}}) {
      columns.push_back({absl::StrCat(prefix, tensor), fp8_num(v)});
    }
  }
  columns.push_back({"fp8_calls_recorded", fp8 ? absl::StrCat(f.calls_recorded()) : "null"});
  columns.push_back({"fp8_quantize_ms", fp8_num(f.quantize_ms())});
  columns.push_back({"fp8_max_diff_vs_cudnn", fp8_num(f.max_diff_vs_cudnn())});
  return columns;
}

std::string RenderCsv(const Report& report) {
  std::string out;
  const std::vector<std::pair<std::string, std::string>> header = CaseColumns(CaseRecord{});
  for (size_t i = 0; i < header.size(); ++i) absl::StrAppend(&out, i ? "," : "", header[i].first);
  out += "\n";
  for (const auto& record : report.cases) {
    const auto columns = CaseColumns(record);
    for (size_t i = 0; i < columns.size(); ++i) {
      // JSON's quoting is CSV's too for our values (no newlines: messages are one line); only
      // a doubled '"' differs, so re-escape those.
      std::string v = columns[i].second;
      if (!v.empty() && v.front() == '"') {
        std::string csv = "\"";
        for (size_t j = 1; j + 1 < v.size(); ++j) {
          if (v[j] == '\\' && j + 2 < v.size() && (v[j + 1] == '"' || v[j + 1] == '\\')) {
            csv += v[j + 1] == '"' ? "\"\"" : "\\";
            ++j;
          } else {
            csv += v[j];
          }
        }
        v = csv + "\"";
      } else if (v == "null") {
        v = "";
      }
      absl::StrAppend(&out, i ? "," : "", v);
    }
    out += "\n";
  }
  return out;
}

std::string RenderJson(const Report& report) {
  const v1::ServerInfo& info = report.server;
  const v1::BenchmarkOptions& o = report.options;
  const Tally tally = Count(report.cases);
  std::string devices;
  for (const auto& d : info.devices()) {
    absl::StrAppend(&devices, devices.empty() ? "" : ", ", "{\"index\": ", d.index(),
                    ", \"kind\": ", JsonQuote(d.kind()), ", \"name\": ", JsonQuote(d.name()),
                    ", \"compute_capability\": ", d.compute_capability(), "}");
  }
  std::string out = absl::StrCat(
      "{\n  \"schema\": \"attn.bench.v1\",\n  \"command\": ", JsonQuote(report.command),
      ",\n  \"target\": ", JsonQuote(report.target), ",\n  \"created\": ", JsonQuote(report.created),
      ",\n  \"wall_seconds\": ", Num(report.wall_seconds),
      ",\n  \"server\": {\"version\": ", JsonQuote(info.version()),
      ", \"hostname\": ", JsonQuote(info.hostname()),
      ", \"cuda_runtime_version\": ", info.cuda_runtime_version(),
      ", \"cuda_driver_version\": ", info.cuda_driver_version(),
      ", \"cudnn_version\": ", JsonQuote(info.cudnn_version()),
      ", \"cpu_fallback\": ", Bool(info.cpu_fallback()), ", \"devices\": [", devices, "]}",
      ",\n  \"options\": {\"warmup\": ", o.has_warmup() ? absl::StrCat(o.warmup()) : "null",
      ", \"repeats\": ", o.has_repeats() ? absl::StrCat(o.repeats()) : "null",
      ", \"case_budget_seconds\": ", o.has_case_budget_seconds() ? Num(o.case_budget_seconds()) : "null",
      ", \"seed\": ", o.seed(), ", \"cuda_graph\": ", Bool(o.cuda_graph()),
      ", \"check_numerics\": ", Bool(o.check_numerics()), "}",
      ",\n  \"summary\": {\"cases\": ", report.cases.size(), ", \"ok\": ", tally.ok,
      ", \"unsupported\": ", tally.unsupported, ", \"failed\": ", tally.failed, "}",
      ",\n  \"cases\": [");
  for (size_t j = 0; j < report.cases.size(); ++j) {
    out += j ? ",\n    {" : "\n    {";
    const auto columns = CaseColumns(report.cases[j]);
    for (size_t i = 0; i < columns.size(); ++i) {
      absl::StrAppend(&out, i ? ", " : "", "\"", columns[i].first, "\": ", columns[i].second);
    }
    out += "}";
  }
  out += report.cases.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

}  // namespace attn::client
