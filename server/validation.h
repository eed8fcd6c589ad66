// Request validation: everything checked before a request reaches a device. Errors are
// InvalidArgument naming the proto field and the rule ("shape.q_len: must be >= 1, got 0").
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "attention/v1/attention.pb.h"
#include "attn/bench.h"
#include "attn/problem.h"

namespace attn::server {

// The bounds a request is held to (the server's flags; reported in ServerInfo.limits).
struct RequestLimits {
  int64_t max_request_bytes = int64_t{64} << 20;  // q + k + v, and the output returned
  int max_cases = 1000;                           // cases in one benchmark job
  int max_warmup = 1000;
  int max_repeats = 10000;
  double max_case_budget_s = 60;
};

// Text a client controls. client_id: at most kMaxClientIdBytes of A-Z a-z 0-9 . _ - (empty:
// none), the label inside a participant in logs. Free text (a case's section): at most
// kMaxTextBytes of valid UTF-8 without control characters. InvalidArgument naming `field` and
// the rule; the message quotes at most the text's start (text.h's Quoted).
inline constexpr size_t kMaxClientIdBytes = 64;
inline constexpr size_t kMaxTextBytes = 128;
absl::Status ValidateClientId(absl::string_view client_id, const std::string& field);
absl::Status ValidateText(absl::string_view text, const std::string& field);

// The problem of an Attend request or benchmark case. `field` prefixes messages ("cases[3]").
absl::StatusOr<AttentionProblem> ProblemFromProto(const attention::v1::Shape& shape,
                                                  attention::v1::DType dtype, bool causal,
                                                  double scale, const std::string& field);

// Sets p.kv_lens from a request's kv_lens field, checked by the engine's rule (ValidateKvLens:
// none, or B values each in 1..S); InvalidArgument prefixed with `field` ("cases[2]"), e.g.
// "cases[2].kv_lens[3] = 9000 is outside 1..S (S = 8192)".
absl::Status SetKvLens(const google::protobuf::RepeatedField<int32_t>& kv_lens,
                       const std::string& field, AttentionProblem& p);

// An Attend request: its problem (with kv_lens), the backend name (known to this engine, or
// auto/empty), the inputs (tensors whose byte counts match the shape and dtype, or a seed), and the
// request and output sizes against max_request_bytes.
absl::StatusOr<AttentionProblem> ValidateAttend(const attention::v1::AttendRequest& request,
                                                const RequestLimits& limits);

// A backend name field: "auto", empty (auto) or a backend built into this engine.
absl::Status ValidateBackendName(const std::string& name, const std::string& field);

// Benchmark options with the proto's defaults applied (0 means the default) and the bounds of
// `limits` and of the engine's runner.
absl::StatusOr<BenchOptions> BenchOptionsFromProto(const attention::v1::BenchmarkOptions& options,
                                                   const RequestLimits& limits);

// The cases a RunBenchmark call runs: of the job (the named suite expanded for `device`, or the
// listed cases, each valid), those case_indices names (each once, in range), or all.
struct JobCases {
  std::vector<BenchCase> cases;
  std::vector<int> indices;  // cases[i] is the job's case indices[i]
  int job_total = 0;         // cases in the whole job
};
absl::StatusOr<JobCases> BenchCasesFromRequest(const attention::v1::RunBenchmarkRequest& request,
                                               const DeviceInfo& device,
                                               const RequestLimits& limits);

// A job's case as the wire carries it (engine -> proto).
attention::v1::BenchmarkCase CaseToProto(const BenchCase& bench_case);

// proto -> engine dtype (proto/convert.h has the other way). DTYPE_UNSPECIFIED and unknown values
// are InvalidArgument on `field`.
absl::StatusOr<DType> DTypeFromProto(attention::v1::DType dtype, const std::string& field);

}  // namespace attn::server
