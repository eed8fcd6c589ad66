// A benchmark case's plan (attn/bench.h's CasePlan): every call the runner makes for it, the
// bounds it makes them within, and the memory they hold. RunPlannedCase (bench.cc) runs it;
// the server's cost and memory admission read it.
#include <algorithm>

#include "absl/strings/str_format.h"
#include "attn/bench.h"
#include "attn/fp8.h"
#include "attn/reference.h"
#include "attn/registry.h"

namespace attn {

absl::StatusOr<CasePlan> PlanCase(const BenchCase& c, const BenchOptions& options,
                                  const DeviceInfo& device) {
  const AttentionProblem& p = c.problem;
  if (auto s = ValidateProblem(p); !s.ok()) return s;
  const BackendRegistry& registry = BackendRegistry::Default();
  auto backend = registry.Resolve(c.backend, p, device);
  if (!backend.ok()) return backend.status();
  const double piece = options.run.max_piece_flops;
  CasePlan plan;
  plan.call = PlanCall(**backend, p, piece);
  const bool fp8 = (*backend)->takes_fp8_recipe();
  plan.cuda_graph = options.cuda_graph && device.kind == DeviceKind::kCuda;
  // A recipe state's first call takes its scales from the current amaxes; it must run eagerly,
  // not inside a captured graph whose replays would repeat it.
  plan.warmup_calls = fp8 && plan.cuda_graph ? std::max(1, options.warmup) : options.warmup;
  plan.calls_per_sample = plan.cuda_graph ? options.graph_calls : 1;
  plan.timed_samples = options.repeats;
  plan.budget_s = options.case_budget_s;
  plan.input_sets = std::max(1, options.rotate_inputs);
  plan.arena_bytes = plan.input_sets * plan.call.tensor_bytes +
                     (fp8 ? Fp8RecipeState::DeviceBytes(options.fp8_recipe) : 0);
  if (!options.check_numerics) return plan;

  plan.check_numerics = true;
  const int64_t out = plan.call.output_bytes;
  plan.host_bytes = out;  // the checked call's output, copied back
  // The codelab's causal-effect rows: the same backend without the mask, where T == S.
  AttentionProblem unmasked = p;
  unmasked.causal = false;
  if (p.causal && p.q_len == p.kv_len && (*backend)->CheckSupport(unmasked, device).ok()) {
    plan.unmasked = PlanCall(**backend, unmasked, piece);
    plan.host_bytes += out;
    plan.arena_bytes += out;
  }
  // An FP8 case's "Max |TE bf16 - TE FP8 autocast|" row: its full-precision peer, same inputs.
  if (fp8) {
    const Backend* peer = registry.Find((*backend)->full_precision_peer());
    if (peer != nullptr && peer->CheckSupport(p, device).ok()) {
      plan.full_precision_peer = PlanCall(*peer, p, piece);
      plan.host_bytes += out;
      plan.arena_bytes += out;
    }
  }
  // The reference: float64 on the host for problems of up to kMaxNumericsFlops, naive float32
  // on the GPU beyond, none on a CPU device beyond.
  AttentionProblem f32 = p;
  f32.dtype = DType::kFloat32;
  const int64_t q = QueryElements(p), kv = KeyValueElements(p), e = DTypeSize(p.dtype);
  if (NumericsOnHost(p)) {
    const Backend* reference = registry.Find("reference");
    if (reference == nullptr) return absl::InternalError("this engine has no reference backend");
    plan.reference = PlanCall(*reference, f32);
    plan.reference->host_reference = true;
    // ReferenceOnHost's float32 inputs and output, one tensor's bytes in the case's dtype at a
    // time while they are made, and the reference's scratch.
    auto scratch = ReferenceScratchBytes(f32);
    if (!scratch.ok()) return scratch.status();
    plan.host_bytes += (q + 2 * kv) * 4 + std::max(q, kv) * e + q * 4 + *scratch;
  } else if (device.kind == DeviceKind::kCuda) {
    const Backend* naive = registry.Find("naive");
    const absl::Status naive_runs = naive == nullptr
                                        ? absl::NotFoundError("this build has no naive backend")
                                        : naive->CheckSupport(f32, device);
    if (naive_runs.ok()) {
      plan.reference = PlanCall(*naive, f32);
      plan.host_bytes += q * 4;  // its output, copied back
      plan.arena_bytes += plan.reference->tensor_bytes;
    } else {
      plan.no_reference = std::string(naive_runs.message());
    }
  } else {
    plan.no_reference = absl::StrFormat(
        "%.1f GFLOP (every key counted) is beyond the float64 reference's %.0f GFLOP limit",
        plan.call.flops / 1e9, kMaxNumericsFlops / 1e9);
  }
  return plan;
}

double CasePlan::Seconds(const std::function<double(const CallPlan&)>& seconds) const {
  const double s = seconds(call), budget = budget_s;
  // Warm-up stops once it held the device half the budget: the call that crosses it counts too.
  const double warm = std::min(warmup_calls * s, budget / 2 + s);
  // One call sizes graph replays; samples stop at the budget, checked every kCheckEveryMs or
  // one sample.
  const double timed = std::min(timed_samples * calls_per_sample * s,
                                budget + std::max(kCheckEveryMs / 1e3, calls_per_sample * s));
  double total = warm + s + timed;
  if (check_numerics) {
    total += s;
    for (const auto* beside : {&unmasked, &full_precision_peer, &reference}) {
      if (beside->has_value()) total += seconds(**beside);
    }
  }
  return total;
}

double CasePlan::LongestCallSeconds(const std::function<double(const CallPlan&)>& seconds) const {
  double longest = seconds(call);
  if (check_numerics) {
    for (const auto* beside : {&unmasked, &full_precision_peer, &reference}) {
      if (beside->has_value()) longest = std::max(longest, seconds(**beside));
    }
  }
  return longest;
}

}  // namespace attn
