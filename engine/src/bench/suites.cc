// The named benchmark suites: the codelab's tables, and a large one for datacenter GPUs.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "attn/bench.h"
#include "attn/kv_lens.h"

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
    // Without a GPU each table is measured with the cpu backend (float32 on the host's SIMD units).
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

// The seed of the large suite's ragged decode lengths.
constexpr uint64_t kDecodeLengthsSeed = 24;

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
  // Decode: a few queries against long K/V caches at N32 K8 H128 (Llama-3-8B's attention),
  // unmasked. Reading K and V bounds it: results report kv_gbps, whose ceiling is the device's
  // copy bandwidth (4.26 TB/s on the H200; PERF.md). B64 with S32768 is left out: its 8 GiB of K
  // and V would not fit a worker's arena in the cohort's deployment (8 GiB); the largest case
  // here holds 2 GiB.
  const auto decode = [](int64_t b, int64_t t, int64_t s) {
    AttentionProblem p = AttentionProblem::SelfAttention(b, t, 32, 128, bf16, false, 8);
    p.kv_len = s;
    return p;
  };
  for (int64_t b : {1, 4, 16, 64}) {
    for (int64_t s : {1024, 4096, 8192, 32768}) {
      if (b * s > 64 * 8192) continue;
      for (int64_t t : {1, 16}) {
        if (t == 1 || b == 16)
          Add(out, "decode", decode(b, t, s), {{"cudnn", bf16}, {"fused", bf16}});
      }
    }
  }
  // Ragged decode: each sequence's length drawn uniformly from 1..S (seeded, the same on every
  // server), so half the cache is read on average.
  for (int64_t b : {16, 64}) {
    AttentionProblem p = decode(b, 1, 8192);
    p.kv_lens = UniformKvLens(b, 1, 8192, kDecodeLengthsSeed);
    Add(out, "decode ragged", p, {{"cudnn", bf16}, {"fused", bf16}});
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
