// The terminal tables.
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/render.h"
#include "client/text_table.h"

namespace attn::client {
namespace {

bool IsOk(const CaseRecord& c) { return client::IsOk(c.result); }

// A sweep cell: the median, "*" when the case budget cut its repeats; "n/a" unsupported.
std::string Cell(const CaseRecord* c, std::vector<std::string>& notes, std::set<std::string>& seen,
                 const std::string& series) {
  if (c == nullptr) return "";
  if (IsOk(*c))
    return FormatMs(c->result.stats().median_ms()) + (c->result.budget_cut() ? "*" : "");
  const bool unsupported = IsUnsupported(c->result);
  const std::string note = absl::StrCat("  ", unsupported ? "n/a" : StatusName(c->result), "  ",
                                        series, ": ", c->result.message());
  if (seen.insert(note).second) notes.push_back(note);
  return unsupported ? "n/a" : "error";
}

TextTable Sweep(const SectionView& s) {
  TextTable t;
  t.title = s.title;
  t.headers.push_back(s.kind == SectionKind::kSeqSweep ? "Seq len" : "Batch size");
  t.right_aligned.push_back(true);
  for (const auto& series : s.series) {
    t.headers.push_back(series + " (ms)");
    t.right_aligned.push_back(true);
  }
  std::set<std::string> seen;
  for (int64_t x : s.points) {
    std::vector<std::string> row = {absl::StrCat(x)};
    for (const auto& series : s.series) {
      auto it = s.cells.find({series, x});
      row.push_back(Cell(it == s.cells.end() ? nullptr : it->second, t.notes, seen, series));
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

std::string Pattern(const v1::Shape& shape) {
  const int64_t k = KvHeads(shape);
  return k == shape.num_heads() ? "MHA" : k == 1 ? "MQA" : "GQA";
}

TextTable Variants(const SectionView& s) {
  TextTable t;
  t.title = s.title;
  t.headers = {"Pattern",      "Q shape", "K shape",    "V shape",
               "Output shape", "Backend", "Median (ms)"};
  t.right_aligned = {false, false, false, false, false, false, true};
  std::set<std::string> seen;
  for (const CaseRecord* c : s.cases) {
    const v1::Shape& shape = c->result.case_().shape();
    t.rows.push_back({Pattern(shape), QShape(shape), KShape(shape), KShape(shape), QShape(shape),
                      SeriesLabel(c->result), Cell(c, t.notes, seen, SeriesLabel(c->result))});
  }
  return t;
}

TextTable List(const SectionView& s) {
  TextTable t;
  t.title = s.title;
  // Decode-like sections add the effective K/V bandwidth beside TFLOP/s (ReadsKeyValues).
  const bool kv = ReadsKeyValues(s);
  t.headers = {"Backend", "Problem", "Median (ms)", "TFLOP/s"};
  if (kv) t.headers.push_back("K/V GB/s");
  for (const char* h : {"Max |err|", "Rel L2 err", "Reference"}) t.headers.push_back(h);
  t.right_aligned = {false, false, true, true, true, true, false};
  if (kv) t.right_aligned.insert(t.right_aligned.begin() + 4, true);
  std::set<std::string> seen;
  for (const CaseRecord* c : s.cases) {
    const v1::CaseResult& r = c->result;
    const std::string label = SeriesLabel(r);
    std::vector<std::string> row = {label, ProblemLabel(r.case_()), Cell(c, t.notes, seen, label)};
    if (IsOk(*c)) {
      row.push_back(absl::StrFormat("%.2f", r.tflops()));
      if (kv) row.push_back(absl::StrFormat("%.1f", r.kv_gbps()));
      for (std::string cell :
           {FormatError(r.max_abs_error()), FormatError(r.rel_l2_error()), r.numerics()})
        row.push_back(std::move(cell));
    }
    row.resize(t.headers.size());
    t.rows.push_back(std::move(row));
  }
  return t;
}

// The codelab's "Causal masking effect on attention output" rows of one causal case.
TextTable CausalEffect(const CaseRecord& c) {
  TextTable t;
  t.title = absl::StrCat("Causal masking effect on attention output — ", SeriesLabel(c.result),
                         ", ", ProblemLabel(c.result.case_()));
  t.headers = {"Position", "Max diff (causal vs full)", "Expected"};
  t.right_aligned = {false, true, false};
  t.rows = {{"First (t=0)", absl::StrFormat("%.4f", c.result.causal_first_diff()),
             "Large — causal restricts to self only"},
            {"Last (t=T-1)", absl::StrFormat("%.2e", c.result.causal_last_diff()),
             "~0 — attends to all positions either way"}};
  return t;
}

std::string Fp8Triple(const v1::Fp8Values& v) {
  return absl::StrFormat("q %.4g, k %.4g, v %.4g, s %.4g, o %.4g", v.q(), v.k(), v.v(), v.s(),
                         v.o());
}

// The codelab's "FP8 attention with TransformerEngine" table for one FP8 case (cudnn_fp8) of a
// list section, beside the section's case of the same problem on the FP8 backend's full-precision
// peer (cudnn); or its "not available" table.
TextTable Fp8Table(const CaseRecord& f, const SectionView& s, const std::string& gpu,
                   const std::string& peer) {
  TextTable t;
  t.headers = {"", "Value"};
  const v1::CaseResult& r = f.result;
  if (!IsOk(f)) {
    t.title = "FP8 attention — not available on this GPU";
    t.rows = {{"GPU", gpu}, {"FP8 support", r.message()}};
    return t;
  }
  t.title = absl::StrCat("FP8 attention with cuDNN (TransformerEngine delayed scaling) — ",
                         ProblemLabel(r.case_()));
  const CaseRecord* bf16 = nullptr;
  for (const CaseRecord* c : s.cases) {
    if (IsOk(*c) && !peer.empty() && c->result.backend() == peer &&
        c->result.case_().shape().SerializeAsString() == r.case_().shape().SerializeAsString() &&
        c->result.case_().causal() == r.case_().causal()) {
      bf16 = c;
    }
  }
  const v1::Fp8Report& fp8 = r.fp8();
  const double ms = r.stats().median_ms();
  t.rows = {
      {"GPU", gpu},
      {"Input dtype", DTypeLabel(r.case_().dtype())},
      {"FP8 output dtype", DTypeLabel(r.case_().dtype()) + " (dequantised from E4M3)"},
      {"Output shape", QShape(r.case_().shape())},
      {absl::StrCat("Max |", peer, " bf16 - ", r.backend(), "|"),
       fp8.max_diff_vs_cudnn() >= 0 ? absl::StrFormat("%.2e", fp8.max_diff_vs_cudnn())
                                    : "- (run with --check)"},
      {"FP8 median (ms)",
       absl::StrCat(FormatMs(ms), fp8.quantize_ms() >= 0 ? absl::StrCat(", of which quantise ",
                                                                        FormatMs(fp8.quantize_ms()))
                                                         : "")}};
  if (bf16 != nullptr) {
    const double b = bf16->result.stats().median_ms();
    t.rows.push_back({absl::StrCat("bf16 ", peer, " median (ms)"), FormatMs(b)});
    t.rows.push_back({"FP8 speed-up over bf16", absl::StrFormat("%.2fx", b / ms)});
  }
  if (r.has_fp8()) {
    t.rows.push_back({"Recipe", fp8.recipe()});
    t.rows.push_back({"Scales used", Fp8Triple(fp8.scales_used())});
    t.rows.push_back({"Amaxes seen", Fp8Triple(fp8.amaxes_seen())});
  }
  return t;
}

}  // namespace

std::string RenderTables(const Report& report) {
  std::string out;
  const v1::ServerInfo& info = report.server;
  if (!info.hostname().empty()) {
    std::string devices;
    for (const auto& d : info.devices())
      absl::StrAppend(&devices, devices.empty() ? "" : ", ", d.name());
    out += absl::StrCat("server: attn-server ", info.version(), " on ", info.hostname(), " (",
                        devices.empty() ? "no devices" : devices,
                        info.cudnn_version().empty() ? "" : ", cuDNN " + info.cudnn_version(), ")",
                        info.cpu_fallback() ? "; cpu backend: " + info.note() : "", "\n\n");
  }
  if (auto defaults = DefaultShapeCases(report.cases); !defaults.empty()) {
    TextTable t;
    t.title = "Attention timing — B=4, T=128, N=8, H=64";
    t.headers = {"Implementation", "Median ms/call"};
    t.right_aligned = {false, true};
    for (const CaseRecord* c : defaults) {
      t.rows.push_back({SeriesLabel(c->result), FormatMs(c->result.stats().median_ms())});
    }
    out += t.Render() + "\n";
  }
  bool causal_effect_shown = false;
  for (const SectionView& s : Sections(report.cases)) {
    TextTable t = s.kind == SectionKind::kSeqSweep || s.kind == SectionKind::kBatchSweep ? Sweep(s)
                  : s.kind == SectionKind::kVariants ? Variants(s)
                                                     : List(s);
    out += t.Render() + "\n";
    // The codelab's one causal-effect table, under the first list section (correctness) that
    // has a checked causal case; the other cases keep theirs in the CSV/JSON and the report.
    if (s.kind != SectionKind::kList) continue;
    for (const CaseRecord* c : s.cases) {
      if (!causal_effect_shown && IsOk(*c) && c->result.causal_first_diff() >= 0) {
        out += CausalEffect(*c).Render() + "\n";
        causal_effect_shown = true;
      }
    }
    for (const CaseRecord* c : s.cases) {
      const std::string& backend = c->result.case_().backend();
      if (TakesFp8Recipe(report.server, backend)) {
        const std::string gpu =
            c->result.device_name().empty()
                ? (report.server.devices().empty() ? "-" : report.server.devices(0).name())
                : c->result.device_name();
        out += Fp8Table(*c, s, gpu, FullPrecisionPeer(report.server, backend)).Render() + "\n";
      }
    }
  }
  const Tally tally = Count(report.cases);
  std::string timing;
  for (const auto& c : report.cases) {
    if (IsOk(c)) {
      timing = c.result.timing();
      break;
    }
  }
  out += absl::StrFormat("%d cases: %d ok, %d unsupported, %d failed in %.2f s.",
                         static_cast<int>(report.cases.size()), tally.ok, tally.unsupported,
                         tally.failed, report.wall_seconds);
  if (tally.ok > 0) {
    out += absl::StrFormat(
        " Times are device time per call, median (%s); * the case budget cut its "
        "repeats.",
        timing);
  }
  out += "\n";
  std::map<std::string, int> served;
  for (const auto& c : report.cases) {
    if (!c.replica.empty()) ++served[absl::StrCat(c.result.hostname(), " (", c.replica, ")")];
  }
  if (!served.empty()) {
    out += "served by:";
    for (const auto& [who, n] : served) absl::StrAppend(&out, " ", who, " ", n, ";");
    out.back() = '\n';
  }
  return out;
}

}  // namespace attn::client
