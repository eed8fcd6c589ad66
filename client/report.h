// What a benchmark run produced, and the views every output format shares: the cases grouped
// into the codelab's tables (sweeps over T or B, the MHA/GQA/MQA variants, lists), with titles.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "attention/v1/attention.pb.h"

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
// "OK", "FAILED_PRECONDITION", ...: abseil's name of the code.
std::string StatusName(const v1::CaseResult& r);

// The server's backends that quantise to FP8 under the job's recipe (BackendVerdict capability).
bool TakesFp8Recipe(const v1::ServerInfo& info, const std::string& backend);
// The backend whose results an FP8 backend's are compared with; empty when none.
std::string FullPrecisionPeer(const v1::ServerInfo& info, const std::string& backend);

// Counts for the summary line and the exit code: unsupported (IsUnsupported), and failed:
// any other non-OK status.
struct Tally {
  int ok = 0, unsupported = 0, failed = 0;
};
Tally Count(const std::vector<CaseRecord>& cases);

// How a section's cases are laid out.
enum class SectionKind {
  kSeqSweep,    // only T (= S) varies: one row per T, one column per series
  kBatchSweep,  // only B varies
  kVariants,    // only K varies: MHA / GQA / MQA rows
  kList,        // anything else: one row per case
};

struct SectionView {
  std::string name;   // the section as the job named it ("sequence sweep")
  std::string title;  // "Sequence-length sweep — B=4, N=8, H=64"
  SectionKind kind = SectionKind::kList;
  std::vector<int64_t> points;      // T or B values, ascending (sweeps)
  std::vector<std::string> series;  // "naive float32", in first-seen order (sweeps)
  std::map<std::pair<std::string, int64_t>, const CaseRecord*> cells;  // (series, point)
  std::vector<const CaseRecord*> cases;  // every case of the section, in order
};

// The sections in first-seen order.
std::vector<SectionView> Sections(const std::vector<CaseRecord>& cases);

// The label of a case's series: requested backend (and what auto resolved to) and dtype.
std::string SeriesLabel(const v1::CaseResult& r);

// The OK, non-causal cases at the codelab's default shape (B, T, N, H) = (4, 128, 8, 64), one
// per series, for the "Attention timing" table and bar chart; empty when there are none.
std::vector<const CaseRecord*> DefaultShapeCases(const std::vector<CaseRecord>& cases);

// "(4, 128, 8, 64)": Q's shape (B, T, N, H); KShape gives (B, S, K, H).
std::string QShape(const v1::Shape& s);
std::string KShape(const v1::Shape& s);
// "B4 T128 S128 N8 K8 H64", plus " causal" and " kv_lens=[1..8192] ragged" (KvLensLabel).
std::string ProblemLabel(const v1::BenchmarkCase& c);
// The case's kv_lens as KvLensLabel writes them; empty without.
std::string KvLensOf(const v1::BenchmarkCase& c);
// Whether a section's cases are bound by reading K and V (queries shorter than the keys, or
// kv_lens: decode): their tables add the effective K/V bandwidth (CaseResult.kv_gbps).
bool ReadsKeyValues(const SectionView& section);
std::string DTypeLabel(v1::DType d);  // "float32"

// Milliseconds with 3-4 significant digits: "0.0123", "1.234", "123.4".
std::string FormatMs(double ms);
// Scientific with 2 decimals ("3.05e-03"), or "-" when negative (not computed).
std::string FormatError(double v);

// S and K as the server reads them: 0 means S = T, K = N.
int64_t KvLen(const v1::Shape& s);
int64_t KvHeads(const v1::Shape& s);

}  // namespace attn::client
