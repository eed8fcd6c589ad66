#include "client/report.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "attn/problem.h"
#include "proto/status.h"

namespace attn::client {

absl::StatusCode StatusOf(const v1::CaseResult& r) { return CodeFromNumber(r.status()); }
bool IsOk(const v1::CaseResult& r) { return StatusOf(r) == absl::StatusCode::kOk; }
bool IsUnsupported(const v1::CaseResult& r) {
  return StatusOf(r) == absl::StatusCode::kFailedPrecondition;
}
std::string StatusName(const v1::CaseResult& r) { return CodeName(StatusOf(r)); }

bool TakesFp8Recipe(const v1::ServerInfo& info, const std::string& backend) {
  for (const auto& v : info.backends()) {
    if (v.backend() == backend && v.takes_fp8_recipe()) return true;
  }
  return false;
}

std::string FullPrecisionPeer(const v1::ServerInfo& info, const std::string& backend) {
  for (const auto& v : info.backends()) {
    if (v.backend() == backend) return v.full_precision_peer();
  }
  return "";
}

Tally Count(const std::vector<CaseRecord>& cases) {
  Tally t;
  for (const auto& c : cases) {
    if (IsOk(c.result))
      ++t.ok;
    else if (IsUnsupported(c.result))
      ++t.unsupported;
    else
      ++t.failed;
  }
  return t;
}

int64_t KvLen(const v1::Shape& s) { return s.kv_len() > 0 ? s.kv_len() : s.q_len(); }
int64_t KvHeads(const v1::Shape& s) {
  return s.num_kv_heads() > 0 ? s.num_kv_heads() : s.num_heads();
}

std::string DTypeLabel(v1::DType d) {
  switch (d) {
    case v1::FLOAT32:
      return "float32";
    case v1::BFLOAT16:
      return "bfloat16";
    case v1::FLOAT16:
      return "float16";
    default:
      return "unspecified";
  }
}

std::string QShape(const v1::Shape& s) {
  return absl::StrCat("(", s.batch(), ", ", s.q_len(), ", ", s.num_heads(), ", ", s.head_dim(),
                      ")");
}

std::string KShape(const v1::Shape& s) {
  return absl::StrCat("(", s.batch(), ", ", KvLen(s), ", ", KvHeads(s), ", ", s.head_dim(), ")");
}

std::string KvLensOf(const v1::BenchmarkCase& c) {
  return KvLensLabel(std::vector<int32_t>(c.kv_lens().begin(), c.kv_lens().end()));
}

std::string ProblemLabel(const v1::BenchmarkCase& c) {
  const v1::Shape& s = c.shape();
  return absl::StrCat("B", s.batch(), " T", s.q_len(), " S", KvLen(s), " N", s.num_heads(), " K",
                      KvHeads(s), " H", s.head_dim(), c.causal() ? " causal" : "",
                      c.kv_lens().empty() ? "" : " kv_lens=", KvLensOf(c));
}

bool ReadsKeyValues(const SectionView& section) {
  for (const CaseRecord* c : section.cases) {
    const v1::BenchmarkCase& bc = c->result.case_();
    if (!bc.kv_lens().empty() || KvLen(bc.shape()) > bc.shape().q_len()) return true;
  }
  return false;
}

std::string SeriesLabel(const v1::CaseResult& r) {
  std::string backend = r.case_().backend().empty() ? "auto" : r.case_().backend();
  if (backend == "auto" && !r.backend().empty()) backend = absl::StrCat("auto→", r.backend());
  return absl::StrCat(backend, " ", DTypeLabel(r.case_().dtype()));
}

std::string FormatMs(double ms) {
  if (ms >= 100) return absl::StrFormat("%.1f", ms);
  if (ms >= 1) return absl::StrFormat("%.3f", ms);
  return absl::StrFormat("%.4f", ms);
}

std::string FormatError(double v) { return v < 0 ? "-" : absl::StrFormat("%.2e", v); }

namespace {

struct Varying {
  bool b = false, t = false, s_follows_t = true, n = false, k = false, h = false, causal = false;
  bool kv_lens = false;  // a case has per-sequence lengths: each row must show its own
};

Varying FindVarying(const std::vector<const CaseRecord*>& cases) {
  std::set<int64_t> b, t, n, k, h;
  std::set<bool> causal;
  Varying v;
  for (const CaseRecord* c : cases) {
    const v1::Shape& s = c->result.case_().shape();
    b.insert(s.batch());
    t.insert(s.q_len());
    n.insert(s.num_heads());
    k.insert(KvHeads(s));
    h.insert(s.head_dim());
    causal.insert(c->result.case_().causal());
    if (KvLen(s) != s.q_len()) v.s_follows_t = false;
    if (!c->result.case_().kv_lens().empty()) v.kv_lens = true;
  }
  v.b = b.size() > 1;
  v.t = t.size() > 1;
  v.n = n.size() > 1;
  v.k = k.size() > 1;
  v.h = h.size() > 1;
  v.causal = causal.size() > 1;
  return v;
}

// "B=4, N=8, H=64" over the fields that do not vary (the sweep's axis left out).
std::string FixedFields(const v1::BenchmarkCase& c, bool skip_b, bool skip_t, bool skip_k) {
  const v1::Shape& s = c.shape();
  std::vector<std::string> parts;
  if (!skip_b) parts.push_back(absl::StrCat("B=", s.batch()));
  if (!skip_t) {
    parts.push_back(absl::StrCat("T=", s.q_len()));
    if (KvLen(s) != s.q_len()) parts.push_back(absl::StrCat("S=", KvLen(s)));
  }
  parts.push_back(absl::StrCat("N=", s.num_heads()));
  if (!skip_k && KvHeads(s) != s.num_heads()) parts.push_back(absl::StrCat("K=", KvHeads(s)));
  parts.push_back(absl::StrCat("H=", s.head_dim()));
  if (c.causal()) parts.push_back("causal");
  return absl::StrJoin(parts, ", ");
}

std::string Title(const std::string& name, SectionKind kind, const v1::BenchmarkCase& first) {
  std::string heading;
  if (kind == SectionKind::kSeqSweep) {
    heading = first.causal() ? "Causal sequence-length sweep" : "Sequence-length sweep";
    return absl::StrCat(heading, " — ", FixedFields(first, false, true, false));
  }
  if (kind == SectionKind::kBatchSweep) {
    return absl::StrCat("Batch-size sweep — ", FixedFields(first, true, false, false));
  }
  if (kind == SectionKind::kVariants) {
    return absl::StrCat("Multi-head attention variants (MHA, GQA, MQA) — ",
                        FixedFields(first, false, false, true));
  }
  heading = name.empty() ? "Cases" : name;
  heading[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(heading[0])));
  return heading;
}

}  // namespace

std::vector<SectionView> Sections(const std::vector<CaseRecord>& cases) {
  std::vector<SectionView> out;
  std::map<std::string, size_t> index;
  for (const auto& c : cases) {
    const std::string& name = c.result.case_().section();
    auto [it, added] = index.emplace(name, out.size());
    if (added) {
      out.emplace_back();
      out.back().name = name;
    }
    out[it->second].cases.push_back(&c);
  }
  for (auto& section : out) {
    const Varying v = FindVarying(section.cases);
    const bool others = v.n || v.h || v.causal || v.kv_lens;
    if (v.t && v.s_follows_t && !v.b && !v.k && !others)
      section.kind = SectionKind::kSeqSweep;
    else if (v.b && !v.t && !v.k && !others)
      section.kind = SectionKind::kBatchSweep;
    else if (v.k && !v.t && !v.b && !others)
      section.kind = SectionKind::kVariants;
    else
      section.kind = SectionKind::kList;
    section.title = Title(section.name, section.kind, section.cases.front()->result.case_());
    if (section.kind != SectionKind::kSeqSweep && section.kind != SectionKind::kBatchSweep)
      continue;
    std::set<int64_t> points;
    for (const CaseRecord* c : section.cases) {
      const v1::Shape& s = c->result.case_().shape();
      const int64_t x = section.kind == SectionKind::kSeqSweep ? s.q_len() : s.batch();
      const std::string label = SeriesLabel(c->result);
      points.insert(x);
      if (std::find(section.series.begin(), section.series.end(), label) == section.series.end()) {
        section.series.push_back(label);
      }
      section.cells[{label, x}] = c;
    }
    section.points.assign(points.begin(), points.end());
  }
  return out;
}

std::vector<const CaseRecord*> DefaultShapeCases(const std::vector<CaseRecord>& cases) {
  std::vector<const CaseRecord*> out;
  std::set<std::string> seen;
  for (const auto& c : cases) {
    const v1::BenchmarkCase& bc = c.result.case_();
    const v1::Shape& s = bc.shape();
    if (!IsOk(c.result) || bc.causal() || s.batch() != 4 || s.q_len() != 128 || KvLen(s) != 128 ||
        s.num_heads() != 8 || KvHeads(s) != 8 || s.head_dim() != 64) {
      continue;
    }
    if (seen.insert(SeriesLabel(c.result)).second) out.push_back(&c);
  }
  return out;
}

}  // namespace attn::client
