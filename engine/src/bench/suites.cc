// The named benchmark suites: the codelab's tables, and a large one for datacenter GPUs.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "attn/bench.h"

namespace attn {
namespace {

void Add(std::vector<BenchCase>& out, const char* section, AttentionProblem p,
         std::initializer_list<std::pair<const char*, DType>> backends) {
  for (const auto& [backend, dtype] : backends) {
    p.dtype = dtype;
    out.push_back({section, p, backend});
  }
}

std::vector<BenchCase> Codelab(bool gpu) {
  std::vector<BenchCase> out;
  constexpr auto f32 = DType::kFloat32, bf16 = DType::kBFloat16;
  if (!gpu) {
    // Without a GPU each table is measured with the cpu backend (float64 accumulation).
    for (int64_t t : {64, 128, 256, 512, 1024}) {
      Add(out, "sequence sweep", AttentionProblem::SelfAttention(4, t, 8, 64, f32), {{"cpu", f32}});
    }
    for (int64_t b : {1, 2, 4, 8, 16}) {
      Add(out, "batch sweep", AttentionProblem::SelfAttention(b, 256, 8, 64, f32), {{"cpu", f32}});
    }
    for (int64_t k : {8, 2, 1}) {
      Add(out, "MHA/GQA/MQA", AttentionProblem::SelfAttention(2, 64, 8, 64, f32, false, k),
          {{"cpu", f32}});
    }
    for (int64_t t : {128, 256, 512, 1024, 2048}) {
      Add(out, "causal sweep", AttentionProblem::SelfAttention(4, t, 8, 64, bf16, true),
          {{"cpu", bf16}});
    }
    // The causal-effect rows (first and last position, causal vs full) with numerics checked.
    Add(out, "correctness", AttentionProblem::SelfAttention(4, 128, 8, 64, bf16, true),
        {{"cpu", bf16}});
    return out;
  }
  // The codelab's default problem is (B, T, N, H) = (4, 128, 8, 64).
  for (int64_t t : {64, 128, 256, 512, 1024}) {
    Add(out, "sequence sweep", AttentionProblem::SelfAttention(4, t, 8, 64, f32),
        {{"naive", f32}, {"fused", f32}, {"fused", bf16}, {"cudnn", bf16}});
  }
  for (int64_t b : {1, 2, 4, 8, 16}) {
    Add(out, "batch sweep", AttentionProblem::SelfAttention(b, 256, 8, 64, f32),
        {{"fused", f32}, {"fused", bf16}, {"cudnn", bf16}});
  }
  // float32 with the automatic backend choice, as the codelab's MHA/GQA/MQA cell runs.
  for (int64_t k : {8, 2, 1}) {
    Add(out, "MHA/GQA/MQA", AttentionProblem::SelfAttention(2, 64, 8, 64, f32, false, k),
        {{"auto", f32}});
  }
  for (int64_t t : {128, 256, 512, 1024, 2048}) {
    Add(out, "causal sweep", AttentionProblem::SelfAttention(4, t, 8, 64, bf16, true),
        {{"fused", bf16}, {"cudnn", bf16}, {"cudnn_fp8", bf16}});
  }
  // The codelab's correctness rows at its default shape, each against the float64 reference
  // when the job checks numerics: naive float32 ("Max |naive - SDPA|"), cuDNN bf16 (its
  // "cuDNN vs XLA" row), causal cuDNN (also the causal-effect rows: first and last position,
  // causal vs full), and FP8 beside bf16.
  Add(out, "correctness", AttentionProblem::SelfAttention(4, 128, 8, 64, f32),
      {{"naive", f32}, {"fused", f32}, {"cudnn", bf16}});
  Add(out, "correctness", AttentionProblem::SelfAttention(4, 128, 8, 64, bf16, true),
      {{"cudnn", bf16}});
  Add(out, "FP8 vs bf16", AttentionProblem::SelfAttention(4, 2048, 8, 64, bf16, true),
      {{"cudnn", bf16}, {"cudnn_fp8", bf16}});
  return out;
}

std::vector<BenchCase> Large() {
  std::vector<BenchCase> out;
  constexpr auto bf16 = DType::kBFloat16;
  for (bool causal : {true, false}) {
    for (int64_t t : {1024, 2048, 4096, 8192}) {
      Add(out, causal ? "large causal" : "large",
          AttentionProblem::SelfAttention(4, t, 16, 128, bf16, causal),
          {{"cudnn", bf16}, {"fused", bf16}, {"cudnn_fp8", bf16}});
    }
  }
  for (int64_t k : {32, 8, 1}) {
    Add(out, "large GQA", AttentionProblem::SelfAttention(4, 2048, 32, 128, bf16, true, k),
        {{"cudnn", bf16}, {"fused", bf16}});
  }
  return out;
}

}  // namespace

std::vector<std::string> SuiteNames() { return {"codelab", "large"}; }

absl::StatusOr<std::vector<BenchCase>> ExpandSuite(absl::string_view name,
                                                   const DeviceInfo& device) {
  if (name == "codelab") return Codelab(device.kind == DeviceKind::kCuda);
  if (name == "large") return Large();
  return absl::InvalidArgumentError(
      absl::StrCat("suite: unknown '", name, "'; expected ", absl::StrJoin(SuiteNames(), " or ")));
}

}  // namespace attn
