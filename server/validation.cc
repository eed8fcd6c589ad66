#include "server/validation.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "attn/registry.h"
#include "proto/convert.h"
#include "server/text.h"

namespace attn::server {
namespace v1 = attention::v1;

namespace {

std::string Join(const std::string& prefix, const char* name) {
  return prefix.empty() ? name : absl::StrCat(prefix, ".", name);
}

absl::Status CheckBytes(const std::string& bytes, int64_t elements, DType dtype, const char* name,
                        const char* dims) {
  const int64_t want = elements * DTypeSize(dtype);  // ValidateProblem proved this fits
  if (static_cast<int64_t>(bytes.size()) != want) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensors.%s: %d bytes, expected %d (%s = %d elements of %s, %d bytes each)", name,
        bytes.size(), want, dims, elements, DTypeName(dtype), DTypeSize(dtype)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateClientId(absl::string_view id, const std::string& field) {
  if (id.empty() || IsName(id, kMaxClientIdBytes)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: at most %d of A-Z a-z 0-9 . _ - (a label for your calls in the server's logs), got %s",
      field, kMaxClientIdBytes, Quoted(id)));
}

absl::Status ValidateText(absl::string_view text, const std::string& field) {
  if (text.size() > kMaxTextBytes) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: at most %d bytes of text, got %s", field,
                                                      kMaxTextBytes, Quoted(text)));
  }
  if (!IsPrintableUtf8(text)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: must be UTF-8 text without control characters, got %s", field, Quoted(text)));
  }
  return absl::OkStatus();
}

v1::BenchmarkCase CaseToProto(const BenchCase& c) {
  v1::BenchmarkCase out;
  out.set_section(c.section);
  ShapeToProto(c.problem, out.mutable_shape());
  out.set_dtype(DTypeToProto(c.problem.dtype));
  out.set_causal(c.problem.causal);
  out.set_backend(c.backend);
  out.mutable_kv_lens()->Add(c.problem.kv_lens.begin(), c.problem.kv_lens.end());
  return out;
}

absl::StatusOr<DType> DTypeFromProto(v1::DType dtype, const std::string& field) {
  switch (dtype) {
    case v1::FLOAT32:
      return DType::kFloat32;
    case v1::BFLOAT16:
      return DType::kBFloat16;
    case v1::FLOAT16:
      return DType::kFloat16;
    default:
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: must be FLOAT32, BFLOAT16 or FLOAT16, got %s", field,
                          dtype == v1::DTYPE_UNSPECIFIED ? "DTYPE_UNSPECIFIED"
                                                         : absl::StrCat(static_cast<int>(dtype))));
  }
}

absl::StatusOr<AttentionProblem> ProblemFromProto(const v1::Shape& shape, v1::DType dtype,
                                                  bool causal, double scale,
                                                  const std::string& field) {
  const std::pair<const char*, int64_t> dims[] = {{"batch", shape.batch()},
                                                  {"q_len", shape.q_len()},
                                                  {"num_heads", shape.num_heads()},
                                                  {"head_dim", shape.head_dim()}};
  for (const auto& [name, value] : dims) {
    if (value < 1) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: must be >= 1, got %d", Join(field, "shape") + "." + name, value));
    }
  }
  for (const auto& [name, value] : {std::pair<const char*, int64_t>{"kv_len", shape.kv_len()},
                                    {"num_kv_heads", shape.num_kv_heads()}}) {
    if (value < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: must be >= 1, or 0 for the default, got %d",
                          Join(field, "shape") + "." + name, value));
    }
  }
  AttentionProblem p;
  p.batch = shape.batch();
  p.q_len = shape.q_len();
  p.kv_len = shape.kv_len() == 0 ? shape.q_len() : shape.kv_len();
  p.num_heads = shape.num_heads();
  p.num_kv_heads = shape.num_kv_heads() == 0 ? shape.num_heads() : shape.num_kv_heads();
  p.head_dim = shape.head_dim();
  p.causal = causal;
  auto d = DTypeFromProto(dtype, Join(field, "dtype"));
  if (!d.ok()) return d.status();
  p.dtype = *d;
  if (scale != 0) {
    if (!std::isfinite(scale) || scale < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: must be finite and > 0, or 0 for 1/sqrt(head_dim); got %g",
                          Join(field, "scale"), scale));
    }
    p.scale = scale;
  }
  if (auto s = ValidateProblem(p); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(Join(field, "shape"), ": ", s.message()));
  }
  return p;
}

absl::Status SetKvLens(const google::protobuf::RepeatedField<int32_t>& kv_lens,
                       const std::string& field, AttentionProblem& p) {
  // The engine's rules (count, then range), their messages under the request's field name:
  // "cases[2].kv_lens[3] = 0 is outside 1..S (S = 8192)". The count is checked before the
  // lengths are copied: a request can name millions in a few bytes each.
  const auto named = [&](const absl::Status& s) {
    return absl::InvalidArgumentError(field.empty() ? std::string(s.message())
                                                    : absl::StrCat(field, ".", s.message()));
  };
  if (auto s = ValidateKvLensCount(kv_lens.size(), p.batch); !s.ok()) return named(s);
  p.kv_lens.assign(kv_lens.begin(), kv_lens.end());
  if (auto s = ValidateKvLens(p); !s.ok()) return named(s);
  return absl::OkStatus();
}

absl::Status ValidateBackendName(const std::string& name, const std::string& field) {
  if (name.empty() || name == kAutoBackend) return absl::OkStatus();
  const BackendRegistry& registry = BackendRegistry::Default();
  if (registry.Find(name) != nullptr) return absl::OkStatus();
  std::string known = std::string(kAutoBackend);
  for (const auto& b : registry.backends()) absl::StrAppend(&known, ", ", b->name());
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: unknown backend %s; this server has %s", field, Quoted(name), known));
}

absl::StatusOr<AttentionProblem> ValidateAttend(const v1::AttendRequest& request,
                                                const RequestLimits& limits) {
  auto p =
      ProblemFromProto(request.shape(), request.dtype(), request.causal(), request.scale(), "");
  if (!p.ok()) return p.status();
  if (auto s = SetKvLens(request.kv_lens(), "", *p); !s.ok()) return s;
  if (auto s = ValidateBackendName(request.backend(), "backend"); !s.ok()) return s;
  const int64_t e = DTypeSize(p->dtype);
  const int64_t q_bytes = QueryElements(*p) * e, kv_bytes = KeyValueElements(*p) * e;
  switch (request.inputs_case()) {
    case v1::AttendRequest::kTensors: {
      const auto& t = request.tensors();
      if (auto s = CheckBytes(t.q(), QueryElements(*p), p->dtype, "q", "B*T*N*H"); !s.ok())
        return s;
      if (auto s = CheckBytes(t.k(), KeyValueElements(*p), p->dtype, "k", "B*S*K*H"); !s.ok())
        return s;
      if (auto s = CheckBytes(t.v(), KeyValueElements(*p), p->dtype, "v", "B*S*K*H"); !s.ok())
        return s;
      if (q_bytes + 2 * kv_bytes > limits.max_request_bytes) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "tensors: %d bytes of q, k and v exceed the server's max_request_bytes (%d)",
            q_bytes + 2 * kv_bytes, limits.max_request_bytes));
      }
      break;
    }
    case v1::AttendRequest::kGenerated:
      break;
    default:
      return absl::InvalidArgumentError(
          "inputs: set either tensors (q, k, v bytes) or generated (a seed)");
  }
  if (!request.omit_output() && q_bytes > limits.max_request_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "omit_output: the %d-byte output exceeds the server's max_request_bytes (%d); set "
        "omit_output to get timings only",
        q_bytes, limits.max_request_bytes));
  }
  return p;
}

absl::StatusOr<BenchOptions> BenchOptionsFromProto(const v1::BenchmarkOptions& o,
                                                   const RequestLimits& limits) {
  BenchOptions out;
  if (o.has_warmup() && (o.warmup() < 0 || o.warmup() > limits.max_warmup)) {
    return absl::InvalidArgumentError(absl::StrFormat("options.warmup: must be in [0, %d], got %d",
                                                      limits.max_warmup, o.warmup()));
  }
  if (o.has_repeats() && (o.repeats() < 1 || o.repeats() > limits.max_repeats)) {
    return absl::InvalidArgumentError(absl::StrFormat("options.repeats: must be in [1, %d], got %d",
                                                      limits.max_repeats, o.repeats()));
  }
  if (o.has_case_budget_seconds() &&
      !(o.case_budget_seconds() > 0 && o.case_budget_seconds() <= limits.max_case_budget_s)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("options.case_budget_seconds: must be in (0, %g], got %g",
                        limits.max_case_budget_s, o.case_budget_seconds()));
  }
  if (o.has_rotate_inputs() && (o.rotate_inputs() < 1 || o.rotate_inputs() > kMaxInputSets)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "options.rotate_inputs: must be in [1, %d], got %d", kMaxInputSets, o.rotate_inputs()));
  }
  if (o.has_warmup()) out.warmup = o.warmup();
  if (o.has_repeats()) out.repeats = o.repeats();
  if (o.has_case_budget_seconds()) out.case_budget_s = o.case_budget_seconds();
  if (o.has_rotate_inputs()) out.rotate_inputs = o.rotate_inputs();
  out.seed = o.seed();
  out.cuda_graph = o.cuda_graph();
  out.check_numerics = o.check_numerics();
  out.run.autotune = o.autotune();
  const v1::Fp8Recipe& r = o.fp8_recipe();
  if (r.has_margin()) out.fp8_recipe.margin = r.margin();
  if (r.has_amax_history_len()) out.fp8_recipe.amax_history_len = r.amax_history_len();
  if (r.amax_compute_algo() == "most_recent") {
    out.fp8_recipe.amax_compute_algo = AmaxComputeAlgo::kMostRecent;
  } else if (!r.amax_compute_algo().empty() && r.amax_compute_algo() != "max") {
    return absl::InvalidArgumentError(
        absl::StrCat("options.fp8_recipe.amax_compute_algo: must be max or most_recent, got ",
                     Quoted(r.amax_compute_algo())));
  }
  if (auto s = ValidateBenchOptions(out); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("options.", s.message()));
  }
  return out;
}

absl::StatusOr<JobCases> BenchCasesFromRequest(const v1::RunBenchmarkRequest& request,
                                               const DeviceInfo& device,
                                               const RequestLimits& limits) {
  std::vector<BenchCase> cases;
  if (request.job_case() == v1::RunBenchmarkRequest::kSuite) {
    if (auto s = ValidateText(request.suite(), "suite"); !s.ok()) return s;
    auto suite = ExpandSuite(request.suite(), device);
    if (!suite.ok()) return suite.status();
    cases = *std::move(suite);
  } else if (request.job_case() == v1::RunBenchmarkRequest::kCases) {
    const auto& list = request.cases().cases();
    if (list.empty()) return absl::InvalidArgumentError("cases: the list is empty");
    if (list.size() > limits.max_cases) {
      return absl::InvalidArgumentError(
          absl::StrFormat("cases: %d cases exceed the server's limit of %d per job", list.size(),
                          limits.max_cases));
    }
    for (int i = 0; i < list.size(); ++i) {
      const v1::BenchmarkCase& c = list[i];
      const std::string field = absl::StrFormat("cases[%d]", i);
      if (auto s = ValidateText(c.section(), field + ".section"); !s.ok()) return s;
      auto p = ProblemFromProto(c.shape(), c.dtype(), c.causal(), 0, field);
      if (!p.ok()) return p.status();
      if (auto s = SetKvLens(c.kv_lens(), field, *p); !s.ok()) return s;
      if (auto s = ValidateBackendName(c.backend(), field + ".backend"); !s.ok()) return s;
      cases.push_back(
          {c.section(), *p, c.backend().empty() ? std::string(kAutoBackend) : c.backend()});
    }
  } else {
    return absl::InvalidArgumentError("job: set either suite (a name) or cases (a list)");
  }
  JobCases out;
  out.job_total = static_cast<int>(cases.size());
  if (request.case_indices().empty()) {
    for (int i = 0; i < out.job_total; ++i) out.indices.push_back(i);
    out.cases = std::move(cases);
    return out;
  }
  std::vector<bool> taken(cases.size(), false);
  for (int i = 0; i < request.case_indices_size(); ++i) {
    const int index = request.case_indices(i);
    if (index < 0 || index >= out.job_total) {
      return absl::InvalidArgumentError(
          absl::StrFormat("case_indices[%d]: must be in [0, %d) (the job's cases), got %d", i,
                          out.job_total, index));
    }
    if (taken[index]) {
      return absl::InvalidArgumentError(
          absl::StrFormat("case_indices[%d]: case %d is named twice", i, index));
    }
    taken[index] = true;
    out.indices.push_back(index);
    out.cases.push_back(cases[index]);
  }
  return out;
}

}  // namespace attn::server
