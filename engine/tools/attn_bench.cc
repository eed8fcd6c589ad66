// attn-bench: times one backend over a list of shapes on one device, without the server.
//
//   attn-bench --backend=naive --dtypes=float32,bfloat16 --batch=4 --seq_lens=1024 --heads=8
//              --head_dim=64 [--kv_heads=8] [--causal] [--warmup=10] [--repeats=50]
//   attn-bench --backend=cudnn,fused --dtypes=bfloat16 --batch=16 --seq_lens=1 --kv_len=8192
//              --heads=32 --kv_heads=8 --head_dim=128 --kv_lens=uniform    (ragged decode)
//
// Inputs are the runner's approximately normal(0, 1) values from --seed (attn::FillNormal), filled
// where they live; each repeat is bracketed by CUDA events on the context's stream (host clock on
// the CPU). --suite runs a named suite through the engine's runner instead.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "attn/attention.h"
#include "attn/bench.h"
#include "attn/device.h"
#include "attn/kv_lens.h"
#include "attn/overrides.h"
#include "attn/records.h"
#include "attn/registry.h"
#include "attn/timing.h"
#include "flags_help.h"

ABSL_FLAG(std::string, backend, "auto", "comma list of backend names (see --list) or auto");
ABSL_FLAG(bool, autotune, false, "let backends with several plans time them and keep the fastest");
ABSL_FLAG(int, device, -2, "CUDA device ordinal; -1 for the CPU; default: GPU 0 if present");
ABSL_FLAG(std::string, dtypes, "float32", "comma list of float32, bfloat16, float16");
ABSL_FLAG(int64_t, batch, 4, "batch size B");
ABSL_FLAG(std::string, seq_lens, "1024", "comma list of query lengths T (S = T unless --kv-len)");
ABSL_FLAG(int64_t, kv_len, 0, "key/value length S; 0 means S = T");
ABSL_FLAG(std::string, kv_lens, "", attn::KvLensSpec::Help());
ABSL_FLAG(int64_t, heads, 8, "query heads N");
ABSL_FLAG(int64_t, kv_heads, 0, "key/value heads K; 0 means K = N");
ABSL_FLAG(int64_t, head_dim, 64, "head dimension H");
ABSL_FLAG(bool, causal, false, "top-left causal mask");
ABSL_FLAG(int, warmup, 10, "untimed calls before timing");
ABSL_FLAG(int, repeats, 50, "timed calls; the median is reported");
ABSL_FLAG(uint64_t, seed, 0, "seed of the normal(0, 1) inputs");
ABSL_FLAG(bool, zero_inputs, false,
          "all-zero Q, K, V instead (what a fresh cudaMalloc holds): shows how far a time depends "
          "on the data through the GPU's power draw; not for reported figures");
ABSL_FLAG(int64_t, arena_mib, 8192, "device arena size in MiB");
ABSL_FLAG(std::string, suite, "",
          "run a named suite (codelab, large) through the engine's runner instead");
ABSL_FLAG(std::string, sections, "",
          "with --suite: comma list of the suite's sections to run (default: all)");
ABSL_FLAG(double, case_budget_s, 2.0,
          "with --suite: stop timing a case after this much device time");
ABSL_FLAG(bool, graph, false, "with --suite: time CUDA-graph replays instead of eager calls");
ABSL_FLAG(bool, check_numerics, false,
          "with --suite: compare outputs with the float64 reference backend (naive float32 on "
          "the GPU for problems beyond its limit)");
ABSL_FLAG(int, rotate_inputs, 1,
          "with --suite: input sets cycled call by call (keeps small problems out of a warm L2)");
ABSL_FLAG(std::string, format, "table", "with --suite: table, csv or json");
ABSL_FLAG(int, fp8_margin, 0, "cudnn_fp8 DelayedScaling margin: scale = (448 / amax) / 2^margin");
ABSL_FLAG(int, fp8_amax_history_len, 1024, "cudnn_fp8 DelayedScaling amax_history_len");
ABSL_FLAG(std::string, fp8_amax_compute_algo, "max",
          "cudnn_fp8 DelayedScaling amax_compute_algo: max or most_recent");
ABSL_FLAG(bool, list, false, "list backends with their verdict for the first case, then exit");
// Forced choices (attn/overrides.h; the device cap: attn/device.h), to time a backend's
// alternatives side by side.
ABSL_FLAG(std::string, fused_kernel, "auto",
          "fused: the kernel, forced where it can run: mma_sync, wgmma, wgmma_ws, split_kv, or "
          "auto (the backend's own choice)");
ABSL_FLAG(
    int, split_kv_stages, 0,
    "fused: K/V stages of the split-KV kernel's TMA plans, 2-6 where they fit (0: automatic)");
ABSL_FLAG(int, tma_l2_promotion, 128, "L2 promotion of TMA copies in bytes: 0, 64, 128 or 256");
ABSL_FLAG(int, fp8_chunks, 0,
          "cudnn_fp8: batch chunks a call, 1, 2 or 4 where the count divides the batch (0: "
          "automatic)");
ABSL_FLAG(int, cpu_threads, 0,
          "threads of the host backends (cpu, reference); 0: one per hardware thread");
ABSL_FLAG(std::string, device_cap, "",
          "cap what the backends are told of the GPU at a smaller device's limits, so they take "
          "its paths: sm_89 (an L4: compute capability 8.9, 99 KiB shared memory a block, 58 "
          "SMs); for running an sm_89 build on a Hopper GPU by JIT from its PTX. Empty: the "
          "device as it is");

namespace {

// Under every table: what K/V GB/s counts and what bounds it.
constexpr const char* kKvBandwidthNote =
    "K/V GB/s: bytes of K and V read (the first kv_lens[b] rows of each sequence, or all S) / "
    "median, the figure decode is bound by; its ceiling is the device copy bandwidth (4.26 TB/s "
    "on the H200, PERF.md)";

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "attn-bench: %s\n", std::string(s.message()).c_str());
  return 1;
}

// Applies the forced-choice flags (attn/overrides.h, attn/device.h) before any backend runs; a
// flag that names a backend this build lacks, at a value other than its default, is an error.
absl::Status ApplyOverrides() {
  const std::string kernel = absl::GetFlag(FLAGS_fused_kernel);
  const std::optional<attn::FusedPath> path = attn::FusedPathNamed(kernel);
  if (kernel != "auto" && !path) {
    return absl::InvalidArgumentError(
        "--fused_kernel: expected auto, mma_sync, wgmma, wgmma_ws or split_kv; got " + kernel);
  }
  const int stages = absl::GetFlag(FLAGS_split_kv_stages);
  if (stages != 0 && (stages < 2 || stages > 6)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--split_kv_stages: expected 0 (automatic) or 2 to 6; got %d", stages));
  }
  const int promotion = absl::GetFlag(FLAGS_tma_l2_promotion);
  if (promotion != 0 && promotion != 64 && promotion != 128 && promotion != 256) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--tma_l2_promotion: expected 0, 64, 128 or 256; got %d", promotion));
  }
  const int chunks = absl::GetFlag(FLAGS_fp8_chunks);
  if (chunks != 0 && chunks != 1 && chunks != 2 && chunks != 4) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--fp8_chunks: expected 0 (automatic), 1, 2 or 4; got %d", chunks));
  }
  const int threads = absl::GetFlag(FLAGS_cpu_threads);
  if (threads < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--cpu_threads: expected 0 (one per hardware thread) or more; got %d", threads));
  }
  const std::string cap_name = absl::GetFlag(FLAGS_device_cap);
  const std::optional<attn::DeviceCap> cap = attn::DeviceCapNamed(cap_name);
  if (!cap_name.empty() && !cap) {
    return absl::InvalidArgumentError("--device_cap: expected sm_89 or empty; got " + cap_name);
  }
#if ATTN_HAVE_CUDA
  attn::SetFusedPathOverride(path);
  if (stages != 0) attn::SetSplitKvStagesOverride(stages);
  attn::SetTmaL2PromotionOverride(promotion);
  attn::SetDeviceCapOverride(cap);
#else
  if (path || stages != 0 || promotion != 128 || cap) {
    return absl::InvalidArgumentError(
        "--fused_kernel, --split_kv_stages, --tma_l2_promotion and --device_cap need a CUDA "
        "build");
  }
#endif
#if ATTN_HAVE_CUDNN
  if (chunks != 0) attn::SetFp8ChunksOverride(chunks);
#else
  if (chunks != 0) return absl::InvalidArgumentError("--fp8_chunks needs a cuDNN build");
#endif
  if (threads > 0 && !attn::SetHostThreads(threads)) {
    return absl::InternalError("--cpu_threads: the host thread pool already exists");
  }
  return absl::OkStatus();
}

// The DelayedScaling recipe from the --fp8_* flags (HYBRID: E4M3 forward, as the codelab's).
absl::StatusOr<attn::DelayedScaling> RecipeFromFlags() {
  attn::DelayedScaling recipe;
  recipe.margin = absl::GetFlag(FLAGS_fp8_margin);
  recipe.amax_history_len = absl::GetFlag(FLAGS_fp8_amax_history_len);
  const std::string algo = absl::GetFlag(FLAGS_fp8_amax_compute_algo);
  if (algo == "max") {
    recipe.amax_compute_algo = attn::AmaxComputeAlgo::kMax;
  } else if (algo == "most_recent") {
    recipe.amax_compute_algo = attn::AmaxComputeAlgo::kMostRecent;
  } else {
    return absl::InvalidArgumentError("--fp8_amax_compute_algo: expected max or most_recent; got " +
                                      algo);
  }
  if (auto s = attn::ValidateDelayedScaling(recipe); !s.ok()) return s;
  return recipe;
}

// "q 1.2e+02 k ... o ..." for five per-tensor values.
std::string Fp8List(const attn::Fp8Values& v) {
  std::string out;
  for (int i = 0; i < attn::kNumFp8Tensors; ++i) {
    absl::StrAppend(&out, i ? " " : "", attn::Fp8TensorName(i), " ", absl::StrFormat("%.4g", v[i]));
  }
  return out;
}

// One result as a record, the same columns for CSV and JSON (attn/records.h writes both).
attn::Json Record(const attn::BenchResult& r, const std::string& device) {
  const attn::AttentionProblem& p = r.bench_case.problem;
  auto fp8 = [&](const attn::Fp8Values& v) { return r.fp8_recipe.empty() ? "" : Fp8List(v); };
  return {{"section", r.bench_case.section},
          {"backend", r.backend},
          {"requested_backend", r.bench_case.backend},
          {"B", p.batch},
          {"T", p.q_len},
          {"S", p.kv_len},
          {"N", p.num_heads},
          {"K", p.num_kv_heads},
          {"H", p.head_dim},
          {"dtype", std::string(attn::DTypeName(p.dtype))},
          {"causal", p.causal},
          {"status", r.status.ok() ? "ok" : std::string(r.status.message())},
          {"median_ms", r.stats.median},
          {"min_ms", r.stats.min},
          {"mean_ms", r.stats.mean},
          {"p10_ms", r.stats.p10},
          {"p90_ms", r.stats.p90},
          {"p99_ms", r.stats.p99},
          {"stddev_ms", r.stats.stddev},
          {"repeats", r.stats.count},
          {"budget_cut", r.budget_cut},
          {"kv_lens", absl::StrJoin(p.kv_lens, ",")},
          {"tflops", r.tflops},
          {"gbps", r.gbps},
          {"kv_gbps", r.kv_gbps},
          {"workspace_bytes", r.workspace_bytes},
          {"peak_arena_bytes", r.peak_arena_bytes},
          {"timing", r.timing},
          {"input_sets", r.input_sets},
          {"max_abs_error", r.max_abs_error},
          {"rel_l2_error", r.rel_l2_error},
          {"numerics", r.numerics_note},
          {"causal_first_diff", r.causal_first_diff},
          {"causal_last_diff", r.causal_last_diff},
          {"fp8_recipe", r.fp8_recipe},
          {"fp8_used_scale", fp8(r.fp8_state.used_scale)},
          {"fp8_seen_amax", fp8(r.fp8_state.seen_amax)},
          {"fp8_next_scale", fp8(r.fp8_state.next_scale)},
          {"fp8_updates", r.fp8_state.updates},
          {"fp8_quantize_ms", r.fp8_quantize_ms},
          {"fp8_vs_cudnn_max_diff", r.fp8_vs_cudnn_max_diff},
          {"device", device}};
}

// Runs a named suite with the engine's runner: a table per section as cases finish, or CSV /
// JSON of every case at the end.
int RunSuite(attn::DeviceContext& context) {
  auto cases = attn::ExpandSuite(absl::GetFlag(FLAGS_suite), context.info());
  if (!cases.ok()) return Fail(cases.status());
  if (const std::string sections = absl::GetFlag(FLAGS_sections); !sections.empty()) {
    const std::vector<std::string> keep = absl::StrSplit(sections, ',');
    std::vector<attn::BenchCase> kept;
    for (const auto& c : *cases) {
      if (std::find(keep.begin(), keep.end(), c.section) != keep.end()) kept.push_back(c);
    }
    if (kept.empty()) {
      return Fail(absl::InvalidArgumentError("--sections: no case of the suite is in " + sections));
    }
    *cases = std::move(kept);
  }
  const std::string format = absl::GetFlag(FLAGS_format);
  if (format != "table" && format != "csv" && format != "json") {
    return Fail(absl::InvalidArgumentError("--format: expected table, csv or json; got " + format));
  }
  attn::BenchOptions options;
  options.warmup = absl::GetFlag(FLAGS_warmup);
  options.repeats = absl::GetFlag(FLAGS_repeats);
  options.case_budget_s = absl::GetFlag(FLAGS_case_budget_s);
  options.seed = absl::GetFlag(FLAGS_seed);
  options.run.autotune = absl::GetFlag(FLAGS_autotune);
  options.cuda_graph = absl::GetFlag(FLAGS_graph);
  options.check_numerics = absl::GetFlag(FLAGS_check_numerics);
  options.rotate_inputs = absl::GetFlag(FLAGS_rotate_inputs);
  auto recipe = RecipeFromFlags();
  if (!recipe.ok()) return Fail(recipe.status());
  options.fp8_recipe = *recipe;
  std::string section;
  const bool table = format == "table";
  auto results = attn::RunBenchmark(
      *cases, options, context, [&](size_t i, size_t total, const attn::BenchResult& r) {
        std::fprintf(stderr, "[%zu/%zu] %s %s\n", i + 1, total, r.bench_case.backend.c_str(),
                     r.bench_case.problem.ToString().c_str());
        if (!table) return;
        if (r.bench_case.section != section) {
          section = r.bench_case.section;
          std::printf("\n== %s\n%-9s %-44s %10s %10s %10s %9s %9s %8s %10s\n", section.c_str(),
                      "backend", "problem", "median ms", "p10 ms", "p90 ms", "TFLOP/s", "K/V GB/s",
                      "repeats", "max |err|");
        }
        const std::string name = r.backend.empty() ? r.bench_case.backend : r.backend;
        if (!r.status.ok()) {
          std::printf("%-9s %-44s skipped: %s\n", name.c_str(),
                      r.bench_case.problem.ToString().c_str(),
                      std::string(r.status.message()).c_str());
        } else {
          std::printf(
              "%-9s %-44s %10.4f %10.4f %10.4f %9.2f %9.1f %7lld%s %10s\n", name.c_str(),
              r.bench_case.problem.ToString().c_str(), r.stats.median, r.stats.p10, r.stats.p90,
              r.tflops, r.kv_gbps, static_cast<long long>(r.stats.count), r.budget_cut ? "*" : " ",
              r.max_abs_error >= 0 ? absl::StrFormat("%.2e", r.max_abs_error).c_str() : "-");
          if (r.causal_first_diff >= 0 && section == "correctness") {
            std::printf(
                "%-9s causal vs full, max diff: first (t=0) %.4f (large: causal restricts "
                "to self only); last (t=T-1) %.2e (~0: attends to all positions either way)\n",
                "", r.causal_first_diff, r.causal_last_diff);
          }
          if (!r.fp8_recipe.empty()) {
            std::printf(
                "%-9s fp8 %s, %lld calls recorded; quantise %.4f ms of the median; "
                "max |fp8 - cudnn| %s\n%-9s   scales used: %s\n%-9s   amaxes seen: %s\n",
                "", r.fp8_recipe.c_str(), static_cast<long long>(r.fp8_state.updates),
                r.fp8_quantize_ms,
                r.fp8_vs_cudnn_max_diff >= 0
                    ? absl::StrFormat("%.2e", r.fp8_vs_cudnn_max_diff).c_str()
                    : "-",
                "", Fp8List(r.fp8_state.used_scale).c_str(), "",
                Fp8List(r.fp8_state.seen_amax).c_str());
          }
        }
        std::fflush(stdout);
      });
  if (!results.ok()) return Fail(results.status());
  const std::string device = context.info().ToString();
  if (table) {
    std::printf("\ntiming: %s. * the case's time budget (--case_budget_s) cut its repeats.\n%s\n",
                results->empty() ? "-" : results->front().timing.c_str(), kKvBandwidthNote);
  } else {
    std::vector<attn::Json> records;
    for (const auto& r : *results) records.push_back(Record(r, device));
    std::vector<std::string> columns;
    const attn::Json header = Record(attn::BenchResult{}, device);
    for (const auto& [name, value] : header.items()) columns.push_back(name);
    std::fputs(format == "csv" ? attn::RecordsCsv(columns, records).c_str()
                               : (attn::RecordsJson(records, 2) + "\n").c_str(),
               stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  attn::HandleHelpFlag(argc, argv, "attn-bench: times an attn backend over shapes on one device.");
  absl::ParseCommandLine(argc, argv);
  if (auto s = ApplyOverrides(); !s.ok()) return Fail(s);

  int ordinal = absl::GetFlag(FLAGS_device);
  if (ordinal == -2) ordinal = attn::CudaDeviceCount() > 0 ? 0 : -1;
  attn::DeviceContextOptions options;
  options.arena_bytes = absl::GetFlag(FLAGS_arena_mib) << 20;
  auto ctx = ordinal < 0 ? attn::DeviceContext::CreateCpu(options)
                         : attn::DeviceContext::CreateCuda(ordinal, options);
  if (!ctx.ok()) return Fail(ctx.status());
  attn::DeviceContext& context = **ctx;
  // Machine-readable formats keep stdout to the data.
  std::fprintf(absl::GetFlag(FLAGS_format) == "table" ? stdout : stderr, "device: %s\n",
               context.info().ToString().c_str());

  if (!absl::GetFlag(FLAGS_suite).empty()) return RunSuite(context);

  auto kv_lens = attn::KvLensSpec::Parse(absl::GetFlag(FLAGS_kv_lens), "--kv_lens");
  if (!kv_lens.ok()) return Fail(kv_lens.status());
  std::vector<attn::AttentionProblem> problems;
  for (absl::string_view d : absl::StrSplit(absl::GetFlag(FLAGS_dtypes), ',')) {
    auto dtype = attn::ParseDType(d);
    if (!dtype.ok()) return Fail(dtype.status());
    for (absl::string_view t : absl::StrSplit(absl::GetFlag(FLAGS_seq_lens), ',')) {
      int64_t len = 0;
      if (!absl::SimpleAtoi(t, &len)) {
        return Fail(absl::InvalidArgumentError("--seq_lens: not an integer list"));
      }
      auto p = attn::AttentionProblem::SelfAttention(
          absl::GetFlag(FLAGS_batch), len, absl::GetFlag(FLAGS_heads),
          absl::GetFlag(FLAGS_head_dim), *dtype, absl::GetFlag(FLAGS_causal),
          absl::GetFlag(FLAGS_kv_heads));
      if (absl::GetFlag(FLAGS_kv_len) > 0) p.kv_len = absl::GetFlag(FLAGS_kv_len);
      auto lens = kv_lens->Lengths(p.batch, p.kv_len, absl::GetFlag(FLAGS_seed));
      if (!lens.ok()) return Fail(lens.status());
      p.kv_lens = *std::move(lens);
      if (auto s = attn::ValidateProblem(p); !s.ok()) return Fail(s);
      problems.push_back(p);
    }
  }
  const auto& registry = attn::BackendRegistry::Default();
  if (absl::GetFlag(FLAGS_list)) {
    for (const auto& v : registry.Verdicts(problems.front(), context.info())) {
      std::printf("%-8s %-4s %s\n", v.backend->name().c_str(), v.support.ok() ? "ok" : "no",
                  v.support.ok() ? v.backend->description().c_str()
                                 : std::string(v.support.message()).c_str());
    }
    return 0;
  }

  std::printf("%-7s %-44s %10s %10s %10s %9s %9s %9s %12s %9s\n", "backend", "problem", "median ms",
              "min ms", "p90 ms", "TFLOP/s", "GB/s*", "K/V GB/s", "workspace MB", "plan ms");
  attn::RunOptions run_options;
  run_options.autotune = absl::GetFlag(FLAGS_autotune);
  auto recipe = RecipeFromFlags();
  if (!recipe.ok()) return Fail(recipe.status());
  for (const auto& p : problems) {
    auto buffers = attn::AllocatePacked(p, context);
    if (!buffers.ok()) return Fail(buffers.status());
    const attn::AttentionTensors& tensors = buffers->tensors;
    if (auto s = attn::FillInputs(context, p, tensors, absl::GetFlag(FLAGS_seed)); !s.ok()) {
      return Fail(s);
    }
    if (absl::GetFlag(FLAGS_zero_inputs)) {
      for (const attn::TensorView* view : {&tensors.q, &tensors.k, &tensors.v}) {
        const std::vector<char> zeros(view->capacity_bytes, 0);
        if (auto s = context.CopyToDevice(view->data, zeros.data(), view->capacity_bytes);
            !s.ok()) {
          return Fail(s);
        }
      }
    }
    for (absl::string_view name : absl::StrSplit(absl::GetFlag(FLAGS_backend), ',')) {
      auto backend = registry.Resolve(name, p, context.info());
      if (!backend.ok()) {
        std::printf("%-7s %-44s skipped: %s\n", std::string(name).c_str(), p.ToString().c_str(),
                    std::string(backend.status().message()).c_str());
        continue;
      }
      // cudnn_fp8: one recipe state per (shape, backend), as the runner holds per case, so the
      // timed calls use delayed scales.
      attn::Fp8RecipeState fp8_state(*recipe);
      attn::RunOptions call_options = run_options;
      const bool fp8 = (*backend)->takes_fp8_recipe();
      if (fp8) call_options.fp8_recipe = &fp8_state;
      const auto before = (*backend)->plan_cache_stats(context);
      auto times = attn::TimeOnDevice(
          context, [&] { return attn::RunAttention(**backend, p, tensors, context, call_options); },
          absl::GetFlag(FLAGS_warmup), absl::GetFlag(FLAGS_repeats));
      if (!times.ok()) return Fail(times.status());
      if (auto s = context.Synchronize(); !s.ok()) return Fail(s);
      const auto after = (*backend)->plan_cache_stats(context);
      std::sort(times->begin(), times->end());
      const double median = (*times)[times->size() / 2];
      const double p90 = (*times)[std::min(times->size() - 1, times->size() * 9 / 10)];
      auto workspace = (*backend)->WorkspaceBytes(p, context, run_options);
      const double plan_ms =
          before && after ? (after->build_seconds - before->build_seconds) * 1e3 : 0.0;
      std::printf("%-7s %-44s %10.4f %10.4f %10.4f %9.2f %9.1f %9.1f %12.1f %9.1f\n",
                  (*backend)->name().c_str(), p.ToString().c_str(), median, times->front(), p90,
                  attn::AttentionFlops(p) / (median * 1e9),
                  attn::AttentionMinBytes(p) / (median * 1e6),
                  attn::KeyValueBytesRead(p) / (median * 1e6),
                  static_cast<double>(workspace.value_or(0)) / (1 << 20), plan_ms);
      if (fp8) {
        auto state = fp8_state.Read(context);
        if (!state.ok()) return Fail(state.status());
        auto steps = attn::TimeFp8Steps(p, tensors.q.data, tensors.k.data, tensors.v.data, context,
                                        absl::GetFlag(FLAGS_repeats));
        if (!steps.ok()) return Fail(steps.status());
        std::printf(
            "%-7s fp8 %s, %lld calls recorded\n"
            "%-7s   steps alone, ms: quantise %.4f, sdpa_fp8 %.4f (plan %s), dequantise "
            "%.4f, recipe update %.4f (sum %.4f)\n"
            "%-7s   scales used: %s\n%-7s   amaxes seen: %s\n",
            "", recipe->ToString().c_str(), static_cast<long long>(state->updates), "",
            steps->quantize_ms, steps->attention_ms, steps->plan.c_str(), steps->dequantize_ms,
            steps->update_ms,
            steps->quantize_ms + steps->attention_ms + steps->dequantize_ms + steps->update_ms, "",
            Fp8List(state->used_scale).c_str(), "", Fp8List(state->seen_amax).c_str());
      }
    }
  }
  std::printf("* GB/s counts the fewest bytes (Q, K, V read once, out written once)\n%s\n",
              kKvBandwidthNote);
  return 0;
}
