// The benchmark runner: per case, resolve the backend, take inputs from the context's arena,
// fill them from the seed, warm up, then time repeats with CUDA events (host clock on the CPU)
// until the repeat count or the case's time budget is reached.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "attn/attention.h"
#include "attn/bench.h"
#include "attn/fp8.h"
#include "attn/reference.h"
#include "attn/registry.h"
#include "attn/timing.h"
#include "bench/normal_fill.h"
#include "platform.h"

namespace attn {
namespace {

// The float64 reference (the cpu backend's) on host copies of the case's inputs (exact values,
// float32 storage: the only rounding is float64 -> float32 at the end, far below any backend's
// error).
absl::Status CpuReference(const AttentionProblem& p, uint64_t case_seed, const StopToken* stop,
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
// problems too large for the cpu reference (its error vs float64 is ~1e-6, far below bf16's).
// Runs one batch and as many kv-head groups at a time as the arena's free space allows for the
// (T, S) score matrices.
absl::Status NaiveFloat32Reference(const AttentionProblem& p, uint64_t case_seed,
                                   DeviceContext& context, const RunOptions& run,
                                   std::vector<float>& want) {
  const Backend* naive = BackendRegistry::Default().Find("naive");
  if (auto s = naive->CheckSupport(p, context.info()); !s.ok()) return s;
  AttentionProblem ref = p;
  ref.dtype = DType::kFloat32;
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
// of only itself) and at the last (which sees every key either way). Needs T == S.
void CausalEffect(const Backend& backend, const AttentionProblem& p, const AttentionTensors& t,
                  const std::vector<uint8_t>& causal_out, DeviceContext& context,
                  const RunOptions& run, BenchResult& r) {
  AttentionProblem full = p;
  full.causal = false;
  if (p.q_len != p.kv_len || !backend.CheckSupport(full, context.info()).ok()) return;
  const int64_t bytes = QueryElements(p) * DTypeSize(p.dtype);
  auto out = context.arena().Allocate(bytes);
  if (!out.ok()) return;
  AttentionTensors tf = t;
  tf.out.data = out->data();
  std::vector<uint8_t> got(static_cast<size_t>(bytes));
  RunOptions unmasked = run;
  unmasked.fp8_recipe = nullptr;  // a call beside the case, not one of its recorded calls
  if (!RunAttention(backend, full, tf, context, unmasked).ok() ||
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
// (cudnn, in bf16/fp16) on the same inputs as an FP8 case, and the largest difference from the
// FP8 output `fp8_out`.
void Fp8VersusCudnn(const Backend& fp8, const AttentionProblem& p, const AttentionTensors& t,
                    const std::vector<uint8_t>& fp8_out, DeviceContext& context,
                    const RunOptions& run, BenchResult& r) {
  const Backend* cudnn = BackendRegistry::Default().Find(fp8.full_precision_peer());
  if (cudnn == nullptr || !cudnn->CheckSupport(p, context.info()).ok()) return;
  const int64_t bytes = QueryElements(p) * DTypeSize(p.dtype);
  auto out = context.arena().Allocate(bytes);
  if (!out.ok()) return;
  AttentionTensors tc = t;
  tc.out.data = out->data();
  std::vector<uint8_t> want(static_cast<size_t>(bytes));
  RunOptions plain;  // no FP8 recipe: the bf16/fp16 call
  plain.stop = run.stop;
  plain.max_piece_flops = run.max_piece_flops;
  if (!RunAttention(*cudnn, p, tc, context, plain).ok() ||
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

// Runs the case once more, copies the output back and compares it with a float32-or-better
// reference on the same inputs: the float64 cpu backend up to kMaxNumericsFlops, naive float32
// on the GPU beyond. Causal cases also get the causal-effect row.
void CheckNumerics(const Backend& backend, const AttentionProblem& p, uint64_t case_seed,
                   const AttentionTensors& t, DeviceContext& context, const RunOptions& run,
                   const std::function<absl::Status()>& call, BenchResult& r) {
  const int64_t qb = QueryElements(p) * DTypeSize(p.dtype);
  std::vector<uint8_t> got(static_cast<size_t>(qb));
  absl::Status s = call();
  if (s.ok()) s = context.CopyToHost(got.data(), t.out.data, qb);
  if (!s.ok()) {
    r.numerics_note = absl::StrFormat("not checked: %s", s.message());
    return;
  }
  if (p.causal) CausalEffect(backend, p, t, got, context, run, r);
  if (backend.takes_fp8_recipe()) Fp8VersusCudnn(backend, p, t, got, context, run, r);
  std::vector<float> want;
  const bool small = NumericsOnHost(p);
  if (small) {
    s = CpuReference(p, case_seed, run.stop, run.host_threads, want);
  } else if (context.info().kind == DeviceKind::kCuda) {
    RunOptions naive_run;
    naive_run.stop = run.stop;
    s = NaiveFloat32Reference(p, case_seed, context, naive_run, want);
  } else {
    s = absl::FailedPreconditionError(
        absl::StrFormat("%.1f GFLOP (every key counted) is beyond the cpu reference's %.0f "
                        "GFLOP limit",
                        AttentionFlops(WithAllKeys(p)) / 1e9, kMaxNumericsFlops / 1e9));
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
  r.numerics_note = small ? "vs cpu float64 reference" : "vs naive float32 on the GPU";
}

void RunCase(const BenchCase& c, const BenchOptions& options, uint64_t seed, DeviceContext& context,
             const StopToken* stop, BenchResult& r) {
  const AttentionProblem& p = c.problem;
  if (r.status = ValidateProblem(p); !r.status.ok()) return;
  auto backend = BackendRegistry::Default().Resolve(c.backend, p, context.info());
  if (!backend.ok()) {
    r.status = backend.status();
    return;
  }
  r.backend = (*backend)->name();
  auto workspace = (*backend)->WorkspaceBytes(p, context, options.run);
  if (!workspace.ok()) {
    r.status = workspace.status();
    return;
  }
  r.workspace_bytes = *workspace;
  // The job's recipe state for this case (cudnn_fp8 only; other backends ignore it).
  const bool fp8 = (*backend)->takes_fp8_recipe();
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
  const int sets = std::max(1, options.rotate_inputs);
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
    return RunAttention(**backend, p, t, context, run);
  };
  bool graph = options.cuda_graph && context.info().kind == DeviceKind::kCuda;

  // Warm-up, cut at half the case budget for slow backends (the first call builds plans).
  const double budget_ms = options.case_budget_s * 1e3;
  double warm_ms = 0;
  // A recipe state's first call takes its scales from the current amaxes; it must run eagerly,
  // not inside a captured graph whose replays would repeat it.
  const int warmup = fp8 && graph ? std::max(1, options.warmup) : options.warmup;
  double last_call_ms = -1;
  for (int i = 0; i < warmup && warm_ms < budget_ms / 2; ++i) {
    auto t0 = TimeOnDevice(context, call, 0, 1);
    if (!t0.ok()) {
      r.status = t0.status();
      return;
    }
    warm_ms += t0->front();
    last_call_ms = t0->front();
  }
  if (options.check_numerics) {
    next_set = 0;  // the check's call writes set 0's output
    CheckNumerics(**backend, p, seed, tensors[0], context, run, call, r);
    if (r.status = CheckStop(stop); !r.status.ok()) return;
  }

  // A graph replay cannot stop part-way, so where something may stop the case a replay holds
  // at most kCheckEveryMs of calls, and calls longer than that are timed eagerly (in pieces).
  int graph_calls = options.graph_calls;
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
                             options.graph_calls);
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
  while (static_cast<int>(samples.size()) < options.repeats) {
    if (absl::Status s = CheckStop(stop); !s.ok()) {
      r.status = s;
      break;
    }
    if (spent_ms >= budget_ms) {
      r.budget_cut = true;
      break;
    }
    // Chunks of ~kCheckEveryMs of device time between checks of the budget and the stop.
    const int remaining = options.repeats - static_cast<int>(samples.size());
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

absl::Status FillNormal(DeviceContext& context, void* dst, int64_t count, DType dtype,
                        uint64_t seed, const StopToken* stop) {
  if (context.info().kind == DeviceKind::kCuda) {
    return FillNormalOnStream(context.stream(), dst, count, dtype, seed);
  }
  return FillNormalHost(dst, count, dtype, seed, stop);
}

bool NumericsOnHost(const AttentionProblem& p) {
  return AttentionFlops(WithAllKeys(p)) <= kMaxNumericsFlops;
}

absl::StatusOr<PackedBuffers> AllocatePacked(const AttentionProblem& p, DeviceContext& context) {
  const int64_t e = DTypeSize(p.dtype);
  const int64_t qb = QueryElements(p) * e, kvb = KeyValueElements(p) * e;
  const int64_t lens_bytes = static_cast<int64_t>(p.kv_lens.size() * sizeof(int32_t));
  PackedBuffers out;
  for (int64_t bytes : {qb, kvb, kvb, qb, lens_bytes}) {
    if (bytes == 0) break;  // no kv_lens
    auto block = context.arena().Allocate(bytes);
    if (!block.ok()) return block.status();
    out.blocks.push_back(*std::move(block));
  }
  int32_t* kv_lens = nullptr;
  if (lens_bytes > 0) {
    kv_lens = static_cast<int32_t*>(out.blocks[4].data());
    if (auto s = context.CopyToDevice(kv_lens, p.kv_lens.data(), lens_bytes); !s.ok()) return s;
  }
  out.tensors = PackedTensors(p, context.memory(), out.blocks[0].data(), out.blocks[1].data(),
                              out.blocks[2].data(), out.blocks[3].data(), kv_lens);
  return out;
}

absl::Status FillInputs(DeviceContext& context, const AttentionProblem& p,
                        const AttentionTensors& t, uint64_t seed, const StopToken* stop) {
  const TensorView* inputs[3] = {&t.q, &t.k, &t.v};
  for (int i = 0; i < 3; ++i) {
    const int64_t count = inputs[i]->capacity_bytes / DTypeSize(p.dtype);
    if (auto s = FillNormal(context, inputs[i]->data, count, p.dtype, InputSeed(seed, 0, i), stop);
        !s.ok())
      return s;
  }
  return absl::OkStatus();
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

absl::StatusOr<std::vector<BenchResult>> RunBenchmark(const std::vector<BenchCase>& cases,
                                                      const BenchOptions& options,
                                                      DeviceContext& context,
                                                      const BenchProgress& progress,
                                                      const StopToken* stop) {
  if (auto s = ValidateBenchOptions(options); !s.ok()) return s;
  std::vector<BenchResult> results(cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    BenchResult& r = results[i];
    r.bench_case = cases[i];
    r.seed = CaseSeed(options.seed, static_cast<int64_t>(i));
    if (absl::Status s = CheckStop(stop); !s.ok()) {
      r.status = s;
    } else {
      RunCase(cases[i], options, r.seed, context, stop, r);
    }
    if (progress) progress(i, cases.size(), r);
  }
  return results;
}

}  // namespace attn
