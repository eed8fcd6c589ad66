// The self-contained HTML report: inline CSS and SVG, no scripts, no external assets.
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/render.h"
#include "client/svg_chart.h"

namespace attn::client {
namespace {

bool IsOk(const CaseRecord& c) { return client::IsOk(c.result); }

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

std::string Median(const CaseRecord& c) {
  if (IsOk(c)) return FormatMs(c.result.stats().median_ms()) + (c.result.budget_cut() ? "*" : "");
  return IsUnsupported(c.result) ? "n/a" : StatusName(c.result);
}

std::string Why(const std::vector<const CaseRecord*>& cases) {
  std::set<std::string> seen;
  std::string out;
  for (const CaseRecord* c : cases) {
    if (IsOk(*c)) continue;
    const std::string line = absl::StrCat(SeriesLabel(c->result), ": ", c->result.message());
    if (seen.insert(line).second) absl::StrAppend(&out, "<li>", HtmlEscape(line), "</li>");
  }
  return out.empty() ? "" : absl::StrCat("<ul class=\"why\">", out, "</ul>\n");
}

std::string Sweep(const SectionView& s) {
  LineChart chart;
  chart.title = s.title;
  chart.x_label = s.kind == SectionKind::kSeqSweep ? "Sequence length T (= S)" : "Batch size B";
  chart.y_label = "Median latency (ms per call)";
  for (const auto& label : s.series) {
    LineSeries line{label, {}};
    for (int64_t x : s.points) {
      auto it = s.cells.find({label, x});
      if (it != s.cells.end() && IsOk(*it->second)) {
        line.points.emplace_back(static_cast<double>(x), it->second->result.stats().median_ms());
      }
    }
    if (!line.points.empty()) chart.series.push_back(std::move(line));
  }
  std::vector<std::string> headers = {s.kind == SectionKind::kSeqSweep ? "Seq len" : "Batch size"};
  std::set<size_t> numeric = {0};
  for (const auto& label : s.series) {
    numeric.insert(headers.size());
    headers.push_back(label + " (ms)");
  }
  std::vector<std::vector<std::string>> rows;
  for (int64_t x : s.points) {
    std::vector<std::string> row = {absl::StrCat(x)};
    for (const auto& label : s.series) {
      auto it = s.cells.find({label, x});
      row.push_back(it == s.cells.end() ? "" : Median(*it->second));
    }
    rows.push_back(std::move(row));
  }
  return absl::StrCat("<section>\n<h2>", HtmlEscape(s.title), "</h2>\n", chart.Render(),
                      Table(headers, rows, numeric), Why(s.cases), "</section>\n");
}

std::string Variants(const SectionView& s) {
  std::vector<std::vector<std::string>> rows;
  for (const CaseRecord* c : s.cases) {
    const v1::Shape& shape = c->result.case_().shape();
    const int64_t k = KvHeads(shape);
    rows.push_back({k == shape.num_heads() ? "MHA"
                    : k == 1               ? "MQA"
                                           : "GQA",
                    QShape(shape), KShape(shape), KShape(shape), QShape(shape),
                    SeriesLabel(c->result), Median(*c)});
  }
  return absl::StrCat(
      "<section>\n<h2>", HtmlEscape(s.title),
      "</h2>\n<p>Every row should produce the same output "
      "shape while K and V shrink from N heads to 1.</p>\n",
      Table({"Pattern", "Q shape", "K shape", "V shape", "Output shape", "Backend", "Median (ms)"},
            rows, {6}),
      Why(s.cases), "</section>\n");
}

std::string Correctness(const Report& report) {
  std::vector<std::vector<std::string>> rows, causal;
  for (const auto& c : report.cases) {
    const v1::CaseResult& r = c.result;
    if (!IsOk(c) || r.max_abs_error() < 0) continue;
    rows.push_back({r.case_().section(), SeriesLabel(r), ProblemLabel(r.case_()),
                    FormatError(r.max_abs_error()), FormatError(r.rel_l2_error()), r.numerics()});
    if (r.causal_first_diff() >= 0) {
      causal.push_back({SeriesLabel(r) + ", " + ProblemLabel(r.case_()),
                        absl::StrFormat("%.4f", r.causal_first_diff()),
                        absl::StrFormat("%.2e", r.causal_last_diff())});
    }
  }
  if (rows.empty()) {
    return "<section>\n<h2>Correctness</h2>\n<p>No case checked its numerics (run with "
           "--check).</p>\n</section>\n";
  }
  std::string out =
      absl::StrCat("<section>\n<h2>Correctness against the reference</h2>\n",
                   Table({"Section", "Backend", "Problem", "Max |err|", "Rel L2 err", "Reference"},
                         rows, {3, 4}));
  if (!causal.empty()) {
    absl::StrAppend(&out,
                    "<h3>Causal masking effect on attention output</h3>\n<p>Max diff, causal vs "
                    "full: large at the first position (causal restricts it to itself), ~0 at the "
                    "last (it attends to every position either way).</p>\n",
                    Table({"Case", "First (t=0)", "Last (t=T-1)"}, causal, {1, 2}));
  }
  return out + "</section>\n";
}

// FP8 cases beside the bf16 cases of the same problem.
std::string Fp8(const Report& report) {
  std::vector<const CaseRecord*> fp8;
  for (const auto& c : report.cases) {
    if (TakesFp8Recipe(report.server, c.result.case_().backend())) fp8.push_back(&c);
  }
  if (fp8.empty()) return "";
  std::string out = "<section>\n<h2>FP8 vs bf16</h2>\n";
  std::vector<std::vector<std::string>> rows;
  for (const CaseRecord* f : fp8) {
    BarChart chart;
    chart.title = absl::StrCat("FP8 vs bf16 — ", ProblemLabel(f->result.case_()));
    chart.unit = "ms";
    std::vector<const CaseRecord*> group;
    for (const auto& c : report.cases) {
      const v1::BenchmarkCase& a = c.result.case_();
      const v1::BenchmarkCase& b = f->result.case_();
      if (a.section() == b.section() &&
          a.shape().SerializeAsString() == b.shape().SerializeAsString() &&
          a.causal() == b.causal() &&
          (TakesFp8Recipe(report.server, a.backend()) || a.dtype() != v1::FLOAT32)) {
        group.push_back(&c);
      }
    }
    for (const CaseRecord* c : group) {
      if (IsOk(*c)) chart.bars.emplace_back(SeriesLabel(c->result), c->result.stats().median_ms());
      rows.push_back({SeriesLabel(c->result), ProblemLabel(c->result.case_()), Median(*c),
                      IsOk(*c) ? FormatError(c->result.max_abs_error()) : "",
                      IsOk(*c) ? c->result.numerics() : c->result.message()});
    }
    if (chart.bars.size() > 1) out += chart.Render();
  }
  absl::StrAppend(
      &out,
      Table({"Backend", "Problem", "Median (ms)", "Max |err|", "Reference / reason"}, rows, {2, 3}),
      Why(fp8));
  // The delayed-scaling state each FP8 case ended with.
  std::vector<std::vector<std::string>> recipe;
  auto five = [](const v1::Fp8Values& v) {
    return absl::StrFormat("%.4g / %.4g / %.4g / %.4g / %.4g", v.q(), v.k(), v.v(), v.s(), v.o());
  };
  for (const CaseRecord* f : fp8) {
    if (!IsOk(*f) || !f->result.has_fp8()) continue;
    const v1::Fp8Report& r = f->result.fp8();
    recipe.push_back({ProblemLabel(f->result.case_()), r.recipe(), five(r.scales_used()),
                      five(r.amaxes_seen()), r.quantize_ms() >= 0 ? FormatMs(r.quantize_ms()) : "-",
                      r.max_diff_vs_cudnn() >= 0 ? FormatError(r.max_diff_vs_cudnn()) : "-"});
  }
  if (!recipe.empty()) {
    absl::StrAppend(&out, "<h3>Delayed scaling (TransformerEngine recipe)</h3>\n",
                    Table({"Problem", "Recipe", "Scales used (q / k / v / s / o)",
                           "Amaxes seen (q / k / v / s / o)", "Quantise (ms)", "Max |bf16 - FP8|"},
                          recipe, {4, 5}));
  }
  out += "</section>\n";
  return out;
}

std::string AllCases(const Report& report) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& c : report.cases) {
    const v1::CaseResult& r = c.result;
    rows.push_back({absl::StrCat(r.index()), r.case_().section(), SeriesLabel(r),
                    ProblemLabel(r.case_()), StatusName(r), Median(c),
                    IsOk(c) ? FormatMs(r.stats().p10_ms()) : "",
                    IsOk(c) ? FormatMs(r.stats().p90_ms()) : "",
                    IsOk(c) ? absl::StrFormat("%.2f", r.tflops()) : "",
                    IsOk(c) ? absl::StrCat(r.stats().count()) : "",
                    absl::StrCat(r.hostname(), c.replica.empty() ? "" : " (" + c.replica + ")")});
  }
  return absl::StrCat("<section>\n<h2>Every case</h2>\n",
                      Table({"#", "Section", "Backend", "Problem", "Status", "Median (ms)",
                             "p10 (ms)", "p90 (ms)", "TFLOP/s", "Repeats", "Served by"},
                            rows, {0, 5, 6, 7, 8, 9}),
                      "</section>\n");
}

constexpr char kStyle[] = R"(<style>
body { font-family: sans-serif; margin: 24px auto; max-width: 1000px; color: #1f2328; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; } h3 { font-size: 15px; }
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
  if (auto defaults = DefaultShapeCases(report.cases); !defaults.empty()) {
    BarChart chart;
    chart.title = "Attention latency at the default shape — B=4, T=128, N=8, H=64 (ms per call)";
    chart.unit = "ms";
    for (const CaseRecord* c : defaults) {
      chart.bars.emplace_back(SeriesLabel(c->result), c->result.stats().median_ms());
    }
    absl::StrAppend(&out, "<section>\n<h2>Attention timing at the default shape</h2>\n",
                    chart.Render(), "</section>\n");
  }
  for (const SectionView& s : Sections(report.cases)) {
    if (s.kind == SectionKind::kSeqSweep || s.kind == SectionKind::kBatchSweep)
      out += Sweep(s);
    else if (s.kind == SectionKind::kVariants)
      out += Variants(s);
  }
  absl::StrAppend(&out, Correctness(report), Fp8(report), AllCases(report), "</body>\n</html>\n");
  return out;
}

}  // namespace attn::client
