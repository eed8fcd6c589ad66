// The benchmark runner: per case, its plan (case_plan.cc: the backend resolved, the calls and
// their bounds), inputs from the context's arena filled from the seed, the warm-up, then repeats
// timed with CUDA events (host clock on the CPU) until the repeat count or the case's time budget
// is reached, and the numerics check the plan lists.
#include "attn/bench.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "attn/attention.h"
#include "attn/fp8.h"
#include "attn/reference.h"
#include "attn/timing.h"
#include "inputs/normal.h"
#include "platform.h"

namespace attn {
namespace {

// The float64 reference (the reference backend's) on host copies of the case's inputs (exact
// values, float32 storage: the only rounding is float64 -> float32 at the end, far below any
// backend's error).
absl::Status ReferenceOnHost(const AttentionProblem& p, uint64_t case_seed, const StopToken* stop,
                             int threads, std::vector<float>& want) {
  AttentionProblem ref = p;
  ref.dtype = DType::kFloat32;
  std::vector<float> in[3];
  for (int i = 0; i < 3; ++i) {
    in[i].resize(static_cast<size_t>(i == 0 ? QueryElements(p) : KeyValueElements(p)));
    std::vector<uint8_t> bytes(in[i].size() * static_cast<size_t>(DTypeSize(p.dtype)));
    for (size_t j = 0; j < in[i].size(); ++j) {
      const double x = NormalAt(InputSeed(case_seed, 0, i), j);
      StoreFromDouble(bytes.data(), p.dtype, static_cast<int64_t>(j), x);
      in[i][j] = static_cast<float>(LoadAsDouble(bytes.data(), p.dtype, static_cast<int64_t>(j)));
    }
  }
  want.assign(in[0].size(), 0.f);
  auto scratch_bytes = ReferenceScratchBytes(ref);
  if (!scratch_bytes.ok()) return scratch_bytes.status();
  std::vector<double> scratch(static_cast<size_t>(*scratch_bytes) / sizeof(double));
  return ReferenceAttention(
      ref,
      PackedTensors(ref, MemoryKind::kHost, in[0].data(), in[1].data(), in[2].data(), want.data(),
                    ref.kv_lens.empty() ? nullptr : ref.kv_lens.data()),
      scratch.data(), stop, threads);  // checks the stop row by row
}

// The naive backend in true float32 on the GPU, on float32 copies of the case's inputs, for
// problems too large for the float64 reference on the host (its error vs float64 is ~1e-6, far
// below bf16's).
// Runs one batch and as many kv-head groups at a time as the arena's free space allows for the
// (T, S) score matrices.
absl::Status NaiveFloat32Reference(const CallPlan& reference, const AttentionProblem& p,
                                   uint64_t case_seed, DeviceContext& context,
                                   const RunOptions& run, std::vector<float>& want) {
  const Backend* naive = reference.backend;
  const AttentionProblem& ref = reference.problem;
  auto buffers = AllocatePacked(ref, context);
  if (!buffers.ok()) return buffers.status();
  const AttentionTensors& full = buffers->tensors;
  const TensorView* inputs[3] = {&full.q, &full.k, &full.v};
  for (int i = 0; i < 3; ++i) {
    const TensorView& t = *inputs[i];
    auto s = FillNormalOnStream(context.stream(), t.data, t.capacity_bytes / 4, DType::kFloat32,
                                InputSeed(case_seed, 0, i), p.dtype);
    if (!s.ok()) return s;
  }
  const int64_t group = p.num_heads / p.num_kv_heads;
  // The most kv heads per call whose workspace fits the arena's largest free block.
  AttentionProblem sub = ref;
  sub.batch = 1;
  if (!p.kv_lens.empty()) sub.kv_lens = {p.kv_lens[0]};  // set per batch element below
  int64_t g = p.num_kv_heads;
  for (; g > 0; g /= 2) {
    sub.num_kv_heads = g;
    sub.num_heads = g * group;
    auto ws = naive->WorkspaceBytes(sub, context);
    if (ws.ok() && *ws <= context.arena().largest_free_block()) break;
  }
  if (g == 0) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "one head's %d x %d float32 score matrix does not fit the arena's free %d bytes", p.q_len,
        p.kv_len, context.arena().largest_free_block()));
  }
  const auto view = [](const TensorView& t, int64_t b, int64_t head, int64_t heads) {
    TensorView v = t;
    const int64_t offset = t.Offset(b, 0, head);
    v.data = static_cast<float*>(t.data) + offset;
    v.capacity_bytes = t.capacity_bytes - offset * 4;
    v.shape = {1, t.shape[1], heads, t.shape[3]};
    return v;
  };
  for (int64_t b = 0; b < p.batch; ++b) {
    if (!p.kv_lens.empty()) sub.kv_lens = {p.kv_lens[b]};
    for (int64_t k0 = 0; k0 < p.num_kv_heads; k0 += g) {
      sub.num_kv_heads = std::min(g, p.num_kv_heads - k0);
      sub.num_heads = sub.num_kv_heads * group;
      const AttentionTensors t{
          view(full.q, b, k0 * group, sub.num_heads), view(full.k, b, k0, sub.num_kv_heads),
          view(full.v, b, k0, sub.num_kv_heads), view(full.out, b, k0 * group, sub.num_heads),
          full.kv_lens == nullptr ? nullptr : full.kv_lens + b};
      if (auto s = RunAttention(*naive, sub, t, context, run); !s.ok()) return s;
    }
  }
  want.resize(static_cast<size_t>(QueryElements(p)));
  return context.CopyToHost(want.data(), full.out.data, QueryElements(p) * 4);
}

// The codelab's causal-effect row: the same backend without the mask on the same inputs, and
// the largest output difference at the first query position (which then sees every key instead
// of only itself) and at the last (which sees every key either way): `twin`, the plan's.
void CausalEffect(const CallPlan& twin, const AttentionProblem& p, const AttentionTensors& t,
                  const std::vector<uint8_t>& causal_out, DeviceContext& context,
                  const RunOptions& run, BenchResult& r) {
  const AttentionProblem& full = twin.problem;
  const int64_t bytes = twin.output_bytes;
  auto out = context.arena().Allocate(bytes);
  if (!out.ok()) return;
  AttentionTensors tf = t;
  tf.out.data = out->data();
  std::vector<uint8_t> got(static_cast<size_t>(bytes));
  RunOptions unmasked = run;
  unmasked.fp8_recipe = nullptr;  // a call beside the case, not one of its recorded calls
  if (!RunAttention(*twin.backend, full, tf, context, unmasked).ok() ||
      !context.CopyToHost(got.data(), out->data(), bytes).ok()) {
    return;
  }
  const int64_t row = p.num_heads * p.head_dim;
  const auto max_diff_at = [&](int64_t pos) {
    double m = 0;
    for (int64_t b = 0; b < p.batch; ++b) {
      const int64_t base = (b * p.q_len + pos) * row;
      for (int64_t j = base; j < base + row; ++j) {
        const double d = std::fabs(LoadAsDouble(causal_out.data(), p.dtype, j) -
                                   LoadAsDouble(got.data(), p.dtype, j));
        m = std::isnan(d) || d > m ? d : m;
      }
    }
    return m;
  };
  r.causal_first_diff = max_diff_at(0);
  r.causal_last_diff = max_diff_at(p.q_len - 1);
}

// The codelab's "Max |TE bf16 - TE FP8 autocast|" row: the FP8 backend's full-precision peer
// (`peer`, the plan's: cudnn in bf16/fp16) on the same inputs as an FP8 case, and the largest
// difference from the FP8 output `fp8_out`.
void Fp8VersusPeer(const CallPlan& peer, const AttentionProblem& p, const AttentionTensors& t,
                   const std::vector<uint8_t>& fp8_out, DeviceContext& context,
                   const RunOptions& run, BenchResult& r) {
  const int64_t bytes = peer.output_bytes;
  auto out = context.arena().Allocate(bytes);
  if (!out.ok()) return;
  AttentionTensors tc = t;
  tc.out.data = out->data();
  std::vector<uint8_t> want(static_cast<size_t>(bytes));
  RunOptions plain;  // no FP8 recipe: the bf16/fp16 call
  plain.stop = run.stop;
  plain.max_piece_flops = run.max_piece_flops;
  if (!RunAttention(*peer.backend, p, tc, context, plain).ok() ||
      !context.CopyToHost(want.data(), out->data(), bytes).ok()) {
    return;
  }
  double m = 0;
  for (int64_t i = 0; i < QueryElements(p); ++i) {
    const double d =
        std::fabs(LoadAsDouble(fp8_out.data(), p.dtype, i) - LoadAsDouble(want.data(), p.dtype, i));
    m = std::isnan(d) || d > m ? d : m;
  }
  r.fp8_vs_cudnn_max_diff = m;
}

// Runs the case once more, copies the output back and compares it with the plan's reference on
// the same inputs (the float64 reference on the host, or naive float32 on the GPU), after the
// calls the plan lists beside it (the causal-effect twin, an FP8 case's full-precision peer).
void CheckNumerics(const CasePlan& plan, uint64_t case_seed, const AttentionTensors& t,
                   DeviceContext& context, const RunOptions& run,
                   const std::function<absl::Status()>& call, BenchResult& r) {
  const AttentionProblem& p = plan.call.problem;
  std::vector<uint8_t> got(static_cast<size_t>(plan.call.output_bytes));
  absl::Status s = call();
  if (s.ok()) s = context.CopyToHost(got.data(), t.out.data, plan.call.output_bytes);
  if (!s.ok()) {
    r.numerics_note = absl::StrFormat("not checked: %s", s.message());
    return;
  }
  if (plan.unmasked) CausalEffect(*plan.unmasked, p, t, got, context, run, r);
  if (plan.full_precision_peer)
    Fp8VersusPeer(*plan.full_precision_peer, p, t, got, context, run, r);
  if (!plan.reference) {
    r.numerics_note = absl::StrFormat("not checked: %s", plan.no_reference);
    return;
  }
  std::vector<float> want;
  if (plan.reference->host_reference) {
    s = ReferenceOnHost(p, case_seed, run.stop, run.host_threads, want);
  } else {
    RunOptions naive_run;
    naive_run.stop = run.stop;
    s = NaiveFloat32Reference(*plan.reference, p, case_seed, context, naive_run, want);
  }
  if (!s.ok()) {
    r.numerics_note = absl::StrFormat("not checked: %s", s.message());
    return;
  }
  double max_abs = 0, err2 = 0, ref2 = 0;
  for (int64_t i = 0; i < QueryElements(p); ++i) {
    const double a = LoadAsDouble(got.data(), p.dtype, i), b = want[static_cast<size_t>(i)];
    const double d = std::fabs(a - b);
    max_abs = std::isnan(d) || d > max_abs ? d : max_abs;  // a NaN stays NaN: it must show
    err2 += d * d;
    ref2 += b * b;
  }
  r.max_abs_error = max_abs;
  r.rel_l2_error = std::sqrt(err2 / std::max(ref2, 1e-300));
  r.numerics_note = plan.reference->host_reference ? "vs float64 reference on the host"
                                                   : "vs naive float32 on the GPU";
}

void RunCase(const CasePlan& plan, const BenchOptions& options, uint64_t seed,
             DeviceContext& context, const StopToken* stop, BenchResult& r) {
  const AttentionProblem& p = plan.call.problem;
  const Backend* backend = plan.call.backend;
  r.backend = backend->name();
  auto workspace = backend->WorkspaceBytes(p, context, options.run);
  if (!workspace.ok()) {
    r.status = workspace.status();
    return;
  }
  r.workspace_bytes = *workspace;
  // The job's recipe state for this case (cudnn_fp8 only; other backends ignore it).
  const bool fp8 = backend->takes_fp8_recipe();
  Fp8RecipeState recipe(options.fp8_recipe);
  RunOptions run = options.run;
  run.stop = stop;
  if (fp8) {
    run.fp8_recipe = &recipe;
    r.fp8_recipe = options.fp8_recipe.ToString();
  }

  const int64_t in_use_before = context.arena().bytes_in_use();
  // Set 0 is the one the numerics check reads; further sets (rotate_inputs) have their own seeds
  // and are cycled through call by call, so small problems are not timed out of a warm L2.
  const int sets = plan.input_sets;
  std::vector<PackedBuffers> buffers;
  std::vector<AttentionTensors> tensors;
  for (int set = 0; set < sets; ++set) {
    auto b = AllocatePacked(p, context);
    if (!b.ok()) {
      r.status = b.status();
      return;
    }
    if (r.status = FillInputs(context, p, b->tensors, InputSeed(seed, set, 0), stop);
        !r.status.ok())
      return;
    tensors.push_back(b->tensors);
    buffers.push_back(*std::move(b));
  }
  // The case's own footprint: what it holds now plus the workspace each call takes.
  r.peak_arena_bytes = context.arena().bytes_in_use() - in_use_before + r.workspace_bytes +
                       (fp8 ? Fp8RecipeState::DeviceBytes(options.fp8_recipe) : 0);
  r.input_sets = sets;
  size_t next_set = 0;
  const auto call = [&] {
    const AttentionTensors& t = tensors[next_set++ % tensors.size()];
    return RunAttention(*backend, p, t, context, run);
  };
  bool graph = plan.cuda_graph;

  // Warm-up, cut at half the case budget for slow backends (the first call builds plans).
  const double budget_ms = plan.budget_s * 1e3;
  double warm_ms = 0;
  double last_call_ms = -1;
  for (int i = 0; i < plan.warmup_calls && warm_ms < budget_ms / 2; ++i) {
    auto t0 = TimeOnDevice(context, call, 0, 1);
    if (!t0.ok()) {
      r.status = t0.status();
      return;
    }
    warm_ms += t0->front();
    last_call_ms = t0->front();
  }
  if (plan.check_numerics) {
    next_set = 0;  // the check's call writes set 0's output
    CheckNumerics(plan, seed, tensors[0], context, run, call, r);
    if (r.status = CheckStop(stop); !r.status.ok()) return;
  }

  // A graph replay cannot stop part-way, so where something may stop the case a replay holds
  // at most kCheckEveryMs of calls, and calls longer than that are timed eagerly (in pieces).
  int graph_calls = plan.calls_per_sample;
  if (graph && stop != nullptr) {
    if (last_call_ms < 0) {
      auto t0 = TimeOnDevice(context, call, 0, 1);
      if (!t0.ok()) {
        r.status = t0.status();
        return;
      }
      last_call_ms = t0->front();
    }
    graph_calls = std::clamp(static_cast<int>(kCheckEveryMs / std::max(last_call_ms, 1e-3)), 1,
                             plan.calls_per_sample);
    graph = last_call_ms <= kCheckEveryMs;
  }
  r.timing = graph ? absl::StrFormat("cuda graph (%d calls per replay)", graph_calls)
             : context.info().kind == DeviceKind::kCuda ? "cuda events"
                                                        : "host clock";
  const auto time = [&](int n) {
    return graph ? TimeGraphReplays(context, call, graph_calls, n)
                 : TimeOnDevice(context, call, 0, n);
  };
  auto first = time(1);
  if (!first.ok()) {
    r.status = first.status();
    return;
  }
  std::vector<double> samples = *first;
  double spent_ms = samples.front() * (graph ? graph_calls : 1);
  while (static_cast<int>(samples.size()) < plan.timed_samples) {
    if (absl::Status s = CheckStop(stop); !s.ok()) {
      r.status = s;
      break;
    }
    if (spent_ms >= budget_ms) {
      r.budget_cut = true;
      break;
    }
    // Chunks of ~kCheckEveryMs of device time between checks of the budget and the stop.
    const int remaining = plan.timed_samples - static_cast<int>(samples.size());
    const int chunk =
        std::clamp(static_cast<int>(kCheckEveryMs /
                                    std::max(samples.front() * (graph ? graph_calls : 1), 1e-3)),
                   1, remaining);
    auto more = time(chunk);
    if (!more.ok()) {
      r.status = more.status();
      return;
    }
    for (double ms : *more) spent_ms += ms * (graph ? graph_calls : 1);
    samples.insert(samples.end(), more->begin(), more->end());
  }
  if (fp8 && recipe.used()) {
    auto state = recipe.Read(context);
    if (!state.ok()) {
      r.status = state.status();
      return;
    }
    r.fp8_state = *state;
    // The quantise step alone, on set 0's inputs (already part of every timed call).
    auto steps = TimeFp8Steps(p, tensors[0].q.data, tensors[0].k.data, tensors[0].v.data, context,
                              20, /*quantize_only=*/true);
    if (steps.ok()) r.fp8_quantize_ms = steps->quantize_ms;
  }
  r.stats = Summarize(samples);
  r.tflops = AttentionFlops(p) / (r.stats.median * 1e9);
  r.gbps = AttentionMinBytes(p) / (r.stats.median * 1e6);
  r.kv_gbps = KeyValueBytesRead(p) / (r.stats.median * 1e6);
}

}  // namespace

bool NumericsOnHost(const AttentionProblem& p) {
  return AttentionFlops(WithAllKeys(p)) <= kMaxNumericsFlops;
}

absl::Status ValidateBenchOptions(const BenchOptions& o) {
  if (o.warmup < 0 || o.warmup > 10000) {
    return absl::InvalidArgumentError(
        absl::StrFormat("warmup: must be in [0, 10000], got %d", o.warmup));
  }
  if (o.repeats < 1 || o.repeats > 100000) {
    return absl::InvalidArgumentError(
        absl::StrFormat("repeats: must be in [1, 100000], got %d", o.repeats));
  }
  if (!(o.case_budget_s > 0 && o.case_budget_s <= 3600)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("case_budget_s: must be in (0, 3600], got %g", o.case_budget_s));
  }
  if (o.rotate_inputs < 1 || o.rotate_inputs > kMaxInputSets) {
    return absl::InvalidArgumentError(absl::StrFormat("rotate_inputs: must be in [1, %d], got %d",
                                                      kMaxInputSets, o.rotate_inputs));
  }
  if (o.graph_calls < 1 || o.graph_calls > 1000) {
    return absl::InvalidArgumentError(
        absl::StrFormat("graph_calls: must be in [1, 1000], got %d", o.graph_calls));
  }
  return ValidateDelayedScaling(o.fp8_recipe);
}

BenchResult RunPlannedCase(const BenchCase& c, const absl::StatusOr<CasePlan>& plan,
                           const BenchOptions& options, uint64_t case_seed, DeviceContext& context,
                           const StopToken* stop) {
  BenchResult r;
  r.bench_case = c;
  r.seed = case_seed;
  if (absl::Status s = CheckStop(stop); !s.ok()) {
    r.status = s;
  } else if (!plan.ok()) {
    r.status = plan.status();
  } else {
    RunCase(*plan, options, case_seed, context, stop, r);
  }
  return r;
}

absl::StatusOr<std::vector<BenchResult>> RunBenchmark(const std::vector<BenchCase>& cases,
                                                      const BenchOptions& options,
                                                      DeviceContext& context,
                                                      const BenchProgress& progress,
                                                      const StopToken* stop) {
  if (auto s = ValidateBenchOptions(options); !s.ok()) return s;
  std::vector<BenchResult> results;
  results.reserve(cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    results.push_back(RunPlannedCase(cases[i], PlanCase(cases[i], options, context.info()), options,
                                     CaseSeed(options.seed, static_cast<int64_t>(i)), context,
                                     stop));
    if (progress) progress(i, cases.size(), results.back());
  }
  return results;
}

}  // namespace attn
