// The benchmark runner: per case, resolve the backend, take inputs from the context's arena,
// fill them from the seed, warm up, then time repeats with CUDA events (host clock on the CPU)
// until the repeat count or the case's time budget is reached.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "attn/attention.h"
#include "attn/bench.h"
#include "attn/registry.h"
#include "attn/timing.h"
#include "bench/normal_fill.h"
#include "platform.h"

namespace attn {
namespace {

// The host copy of an input: the same NormalAt(seed, i) the device fill computes.
std::vector<uint8_t> NormalBytes(int64_t count, DType dtype, uint64_t seed) {
  std::vector<uint8_t> bytes(static_cast<size_t>(count * DTypeSize(dtype)));
  for (int64_t i = 0; i < count; ++i) {
    StoreFromDouble(bytes.data(), dtype, i, NormalAt(seed, static_cast<uint64_t>(i)));
  }
  return bytes;
}

bool Cancelled(const std::atomic<bool>* cancel) { return cancel != nullptr && cancel->load(); }

// Runs the case once more, copies the output back and compares it with the float64 cpu backend
// on the same input bytes.
void CheckNumerics(const AttentionProblem& p, const std::vector<uint8_t> (&host)[3], void* out,
                   DeviceContext& context, const std::function<absl::Status()>& call,
                   BenchResult& r) {
  if (AttentionFlops(p) > kMaxNumericsFlops) {
    r.numerics_note = absl::StrFormat(
        "not checked: %.1f GFLOP is beyond the cpu reference's %.0f GFLOP limit",
        AttentionFlops(p) / 1e9, kMaxNumericsFlops / 1e9);
    return;
  }
  const Backend* cpu = BackendRegistry::Default().Find("cpu");
  const int64_t e = DTypeSize(p.dtype), qb = QueryElements(p) * e;
  std::vector<uint8_t> got(static_cast<size_t>(qb));
  absl::Status s = call();
  if (s.ok()) s = context.CopyToHost(got.data(), out, qb);
  // The reference runs in float32 storage on the exact input values, so its only rounding is
  // float64 -> float32 at the end, far below any backend's error.
  AttentionProblem ref = p;
  ref.dtype = DType::kFloat32;
  auto widen = [](const std::vector<uint8_t>& bytes, DType dtype) {
    std::vector<float> f(bytes.size() / static_cast<size_t>(DTypeSize(dtype)));
    for (size_t i = 0; i < f.size(); ++i) {
      f[i] = static_cast<float>(LoadAsDouble(bytes.data(), dtype, static_cast<int64_t>(i)));
    }
    return f;
  };
  std::vector<float> q = widen(host[0], p.dtype), k = widen(host[1], p.dtype),
                     v = widen(host[2], p.dtype), want(q.size());
  DeviceContextOptions host_options;
  host_options.arena_bytes = cpu->WorkspaceBytes(ref, context).value_or(0);
  host_options.pinned_host_bytes = 0;
  auto host_context = DeviceContext::CreateCpu(host_options);
  if (s.ok()) s = host_context.status();
  if (s.ok()) {
    s = RunAttention(*cpu, ref,
                     PackedTensors(ref, MemoryKind::kHost, q.data(), k.data(), v.data(), want.data()),
                     **host_context);
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
  r.numerics_note = "vs cpu float64 reference";
}

void RunCase(const BenchCase& c, const BenchOptions& options, uint64_t seed, DeviceContext& context,
             const std::atomic<bool>* cancel, BenchResult& r) {
  const AttentionProblem& p = c.problem;
  if (r.status = ValidateProblem(p); !r.status.ok()) return;
  const BackendRegistry& registry = BackendRegistry::Default();
  if (c.backend != kAutoBackend && registry.Find(c.backend) == nullptr) {
    r.status = absl::FailedPreconditionError(
        absl::StrFormat("%s: not built into this engine", c.backend));
    return;
  }
  auto backend = registry.Resolve(c.backend, p, context.info());
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

  const int64_t e = DTypeSize(p.dtype);
  const int64_t qb = QueryElements(p) * e, kvb = KeyValueElements(p) * e;
  const int64_t in_use_before = context.arena().bytes_in_use();
  // Set 0 is the one the numerics check reads; further sets (rotate_inputs) have their own seeds
  // and are cycled through call by call, so small problems are not timed out of a warm L2.
  const int sets = std::max(1, options.rotate_inputs);
  const bool on_device = context.info().kind == DeviceKind::kCuda;
  std::vector<ArenaBlock> blocks;
  std::vector<AttentionTensors> tensors;
  std::vector<uint8_t> host[3];
  for (int set = 0; set < sets; ++set) {
    void* data[4];
    for (int i = 0; i < 4; ++i) {
      auto block = context.arena().Allocate(i == 0 || i == 3 ? qb : kvb);
      if (!block.ok()) {
        r.status = block.status();
        return;
      }
      data[i] = block->data();
      blocks.push_back(*std::move(block));
    }
    // Inputs are filled where they live (a kernel on the GPU); the numerics check and the CPU
    // context use host copies of the same values.
    for (int i = 0; i < 3; ++i) {
      const int64_t bytes = i == 0 ? qb : kvb, count = bytes / e;
      const uint64_t tensor_seed = seed + 3 * set + i;
      std::vector<uint8_t> copy;
      if ((options.check_numerics && set == 0) || !on_device) {
        copy = NormalBytes(count, p.dtype, tensor_seed);
      }
      r.status = on_device ? FillNormalOnStream(context.stream(), data[i], count, p.dtype, tensor_seed)
                           : context.CopyToDevice(data[i], copy.data(), bytes);
      if (!r.status.ok()) return;
      if (set == 0) host[i] = std::move(copy);
    }
    tensors.push_back(PackedTensors(p, context.memory(), data[0], data[1], data[2], data[3]));
  }
  // The case's own footprint: what it holds now plus the workspace each call takes.
  r.peak_arena_bytes = context.arena().bytes_in_use() - in_use_before + r.workspace_bytes;
  r.input_sets = sets;
  size_t next_set = 0;
  const auto call = [&] {
    const AttentionTensors& t = tensors[next_set++ % tensors.size()];
    return RunAttention(**backend, p, t, context, options.run);
  };

  // Warm-up, cut at half the case budget for slow backends (the first call builds plans).
  const double budget_ms = options.case_budget_s * 1e3;
  double warm_ms = 0;
  for (int i = 0; i < options.warmup && warm_ms < budget_ms / 2; ++i) {
    auto t0 = TimeOnDevice(context, call, 0, 1);
    if (!t0.ok()) {
      r.status = t0.status();
      return;
    }
    warm_ms += t0->front();
  }
  if (options.check_numerics) {
    next_set = 0;  // the check's call writes set 0's output
    CheckNumerics(p, host, tensors[0].out.data, context, call, r);
  }

  const bool graph = options.cuda_graph && context.info().kind == DeviceKind::kCuda;
  r.timing = graph ? absl::StrFormat("cuda graph (%d calls per replay)", options.graph_calls)
             : context.info().kind == DeviceKind::kCuda ? "cuda events"
                                                        : "host clock";
  const auto time = [&](int n) {
    return graph ? TimeGraphReplays(context, call, options.graph_calls, n)
                 : TimeOnDevice(context, call, 0, n);
  };
  auto first = time(1);
  if (!first.ok()) {
    r.status = first.status();
    return;
  }
  std::vector<double> samples = *first;
  double spent_ms = samples.front() * (graph ? options.graph_calls : 1);
  while (static_cast<int>(samples.size()) < options.repeats) {
    if (Cancelled(cancel)) {
      r.status = absl::CancelledError("benchmark cancelled");
      break;
    }
    if (spent_ms >= budget_ms) {
      r.budget_cut = true;
      break;
    }
    // Chunks of ~50 ms of device time between checks of the budget and the cancel flag.
    const int remaining = options.repeats - static_cast<int>(samples.size());
    const int chunk = std::clamp(static_cast<int>(50.0 / std::max(samples.front(), 1e-3)), 1, remaining);
    auto more = time(chunk);
    if (!more.ok()) {
      r.status = more.status();
      return;
    }
    for (double ms : *more) spent_ms += ms * (graph ? options.graph_calls : 1);
    samples.insert(samples.end(), more->begin(), more->end());
  }
  r.stats = Summarize(samples);
  r.tflops = AttentionFlops(p) / (r.stats.median * 1e9);
  r.gbps = AttentionMinBytes(p) / (r.stats.median * 1e6);
}

}  // namespace

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
  if (o.rotate_inputs < 1 || o.rotate_inputs > 64) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rotate_inputs: must be in [1, 64], got %d", o.rotate_inputs));
  }
  if (o.graph_calls < 1 || o.graph_calls > 1000) {
    return absl::InvalidArgumentError(
        absl::StrFormat("graph_calls: must be in [1, 1000], got %d", o.graph_calls));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<BenchResult>> RunBenchmark(const std::vector<BenchCase>& cases,
                                                      const BenchOptions& options,
                                                      DeviceContext& context,
                                                      const BenchProgress& progress,
                                                      const std::atomic<bool>* cancel) {
  if (auto s = ValidateBenchOptions(options); !s.ok()) return s;
  std::vector<BenchResult> results(cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    BenchResult& r = results[i];
    r.bench_case = cases[i];
    if (Cancelled(cancel)) {
      r.status = absl::CancelledError("benchmark cancelled before this case");
    } else {
      // Each case draws from its own streams: 3 tensors x up to 64 input sets.
      RunCase(cases[i], options, options.seed + 3 * 64 * i, context, cancel, r);
    }
    if (progress) progress(i, cases.size(), r);
  }
  return results;
}

}  // namespace attn
