#include "attn/registry.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace attn {
namespace {

const AttentionProblem kProblem = AttentionProblem::SelfAttention(1, 16, 2, 32, DType::kFloat32);

TEST(Registry, ListsEveryBackendOfTheProjectFastestFirst) {
  std::vector<std::string> names;
  for (const auto& b : BackendRegistry::Default().backends()) names.push_back(b->name());
  EXPECT_EQ(names,
            (std::vector<std::string>{"cudnn", "fused", "naive", "cpu", "reference", "cudnn_fp8"}));
}

// A backend this build left out, or one this device cannot run, is unsupported (with the
// reason), never an unknown name; a name the project never had is invalid.
TEST(Registry, EveryBackendOnTheHostIsUnsupportedWithItsReasonButCpuAndReference) {
  const BackendRegistry& registry = BackendRegistry::Default();
  for (const char* name : {"cudnn", "fused", "naive", "cudnn_fp8"}) {
    auto b = registry.Resolve(name, kProblem, CpuDeviceInfo());
    EXPECT_EQ(b.status().code(), absl::StatusCode::kFailedPrecondition) << name;
    EXPECT_TRUE(IsUnsupported(b.status())) << name;
    const std::string prefix = absl::StrCat(name, ": needs a CUDA device");
    EXPECT_EQ(b.status().message().substr(0, prefix.size()), prefix) << b.status();
  }
  EXPECT_TRUE(registry.Resolve("cpu", kProblem, CpuDeviceInfo()).ok());
  EXPECT_TRUE(registry.Resolve("reference", kProblem, CpuDeviceInfo()).ok());
}

TEST(Registry, UnsupportedMacroSaysWhichRuleFailed) {
  const auto check = [](int64_t h) -> absl::Status {
    ATTN_UNSUPPORTED_IF(h % 8 != 0, "demo: head_dim must be a multiple of 8; got %d", h);
    return absl::OkStatus();
  };
  EXPECT_TRUE(check(64).ok());
  EXPECT_EQ(check(20),
            absl::FailedPreconditionError("demo: head_dim must be a multiple of 8; got 20"));
}

// The fast float32 backend, never the float64 reference, whatever the problem.
TEST(Registry, AutoPicksCpuOnTheHost) {
  for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    for (bool causal : {false, true}) {
      const auto p = AttentionProblem::SelfAttention(2, 17, 4, 257, dtype, causal, 1);
      auto b = BackendRegistry::Default().Resolve("auto", p, CpuDeviceInfo());
      ASSERT_TRUE(b.ok()) << b.status();
      EXPECT_EQ((*b)->name(), "cpu") << p.ToString();
    }
  }
}

TEST(Registry, AutoPicksAGpuBackendOnAGpu) {
  if (!BuiltWithCuda()) GTEST_SKIP() << "built without CUDA: no GPU backend to pick";
  DeviceInfo gpu;
  gpu.kind = DeviceKind::kCuda;
  gpu.cc_major = 9;
  auto b = BackendRegistry::Default().Resolve("auto", kProblem, gpu);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->name(), "fused");
}

TEST(Registry, VerdictsGiveEveryBackendsReason) {
  if (!BuiltWithCuda()) GTEST_SKIP() << "built without CUDA: no GPU backend supports anything";
  DeviceInfo gpu;
  gpu.kind = DeviceKind::kCuda;
  gpu.cc_major = 9;
  for (const auto& v : BackendRegistry::Default().Verdicts(kProblem, gpu)) {
    if (v.backend->name() == "cpu" || v.backend->name() == "reference") {
      EXPECT_EQ(
          v.support.message(),
          v.backend->name() + ": runs on the host only; pick a GPU backend for a CUDA device");
    } else if (v.backend->name() == "cudnn") {  // kProblem is float32
      EXPECT_EQ(v.support.message(),
                "cudnn: cuDNN SDPA requires bfloat16 or float16 input; got float32");
    } else if (v.backend->name() == "cudnn_fp8") {
      EXPECT_EQ(v.support.message(),
                "cudnn_fp8: takes bfloat16 or float16 input (quantised to E4M3 on the device); got "
                "float32");
    } else {
      EXPECT_TRUE(v.support.ok()) << v.backend->name() << ": " << v.support;
    }
  }
}

TEST(Registry, UnknownNameListsTheKnownOnes) {
  auto b = BackendRegistry::Default().Resolve("flash9", kProblem, CpuDeviceInfo());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(b.status().message().substr(0, 47), "backend: unknown 'flash9'; expected one of auto");
}

TEST(Registry, NamedBackendThatCannotRunSaysWhy) {
  if (!BuiltWithCuda()) GTEST_SKIP() << "built without CUDA: no naive backend";
  auto b = BackendRegistry::Default().Resolve("naive", kProblem, CpuDeviceInfo());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(b.status().message(), "naive: needs a CUDA device");
}

}  // namespace
}  // namespace attn
