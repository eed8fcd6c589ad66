// The benchmark runner: per case, resolve the backend, take inputs from the context's arena,
// fill them from the seed, warm up, then time repeats with CUDA events (host clock on the CPU)
// until the repeat count or the case's time budget is reached.
#include <algorithm>
#include <random>

#include "absl/strings/str_format.h"
#include "attn/attention.h"
#include "attn/bench.h"
#include "attn/registry.h"
#include "attn/timing.h"

namespace attn {
namespace {

// normal(0, 1) values in `dtype`, reproducible from `seed`.
std::vector<uint8_t> NormalBytes(int64_t count, DType dtype, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<uint8_t> bytes(static_cast<size_t>(count * DTypeSize(dtype)));
  for (int64_t i = 0; i < count; ++i) StoreFromDouble(bytes.data(), dtype, i, normal(rng));
  return bytes;
}

bool Cancelled(const std::atomic<bool>* cancel) { return cancel != nullptr && cancel->load(); }

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
  auto q = context.arena().Allocate(qb);
  auto k = context.arena().Allocate(kvb);
  auto v = context.arena().Allocate(kvb);
  auto out = context.arena().Allocate(qb);
  for (auto* block : {&q, &k, &v, &out}) {
    if (!block->ok()) {
      r.status = block->status();
      return;
    }
  }
  uint64_t tensor_seed = seed;
  for (auto* block : {&q, &k, &v}) {
    const auto bytes = NormalBytes((*block)->size() / e, p.dtype, tensor_seed++);
    if (r.status = context.CopyToDevice((*block)->data(), bytes.data(), (*block)->size());
        !r.status.ok())
      return;
  }
  const MemoryKind mem = context.memory();
  const AttentionTensors t{
      TensorView::Contiguous(q->data(), qb, p.dtype, mem, p.batch, p.q_len, p.num_heads, p.head_dim),
      TensorView::Contiguous(k->data(), kvb, p.dtype, mem, p.batch, p.kv_len, p.num_kv_heads, p.head_dim),
      TensorView::Contiguous(v->data(), kvb, p.dtype, mem, p.batch, p.kv_len, p.num_kv_heads, p.head_dim),
      TensorView::Contiguous(out->data(), qb, p.dtype, mem, p.batch, p.q_len, p.num_heads, p.head_dim)};
  // The case's own footprint: what it holds now plus the workspace each call takes.
  r.peak_arena_bytes = context.arena().bytes_in_use() - in_use_before + r.workspace_bytes;
  const auto call = [&] { return RunAttention(**backend, p, t, context, options.run); };

  auto warm = TimeOnDevice(context, call, std::max(0, options.warmup), 1);
  if (!warm.ok()) {
    r.status = warm.status();
    return;
  }
  std::vector<double> samples = *warm;  // the first timed call, after the warm-up
  double spent_ms = samples.front();
  while (static_cast<int>(samples.size()) < options.repeats) {
    if (Cancelled(cancel)) {
      r.status = absl::CancelledError("benchmark cancelled");
      break;
    }
    if (spent_ms >= options.case_budget_s * 1e3) {
      r.budget_cut = true;
      break;
    }
    // Chunks of ~50 ms of device time between checks of the budget and the cancel flag.
    const int remaining = options.repeats - static_cast<int>(samples.size());
    const int chunk = std::clamp(static_cast<int>(50.0 / std::max(samples.front(), 1e-3)), 1, remaining);
    auto more = TimeOnDevice(context, call, 0, chunk);
    if (!more.ok()) {
      r.status = more.status();
      return;
    }
    for (double ms : *more) spent_ms += ms;
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
      RunCase(cases[i], options, options.seed + 3 * i, context, cancel, r);
    }
    if (progress) progress(i, cases.size(), r);
  }
  return results;
}

}  // namespace attn
