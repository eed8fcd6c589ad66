#include "attn/registry.h"

#include "gtest/gtest.h"

namespace attn {
namespace {

const AttentionProblem kProblem = AttentionProblem::SelfAttention(1, 16, 2, 32, DType::kFloat32);

TEST(Registry, ListsTheBuiltInBackendsFastestFirst) {
  std::vector<std::string> names;
  for (const auto& b : BackendRegistry::Default().backends()) names.push_back(b->name());
  if (ATTN_HAVE_CUDNN) {
    EXPECT_EQ(names, (std::vector<std::string>{"cudnn", "fused", "naive", "cpu", "cudnn_fp8"}));
  } else if (BuiltWithCuda()) {
    EXPECT_EQ(names, (std::vector<std::string>{"fused", "naive", "cpu"}));
  } else {
    EXPECT_EQ(names, (std::vector<std::string>{"cpu"}));
  }
}

TEST(Registry, AutoPicksCpuOnTheHost) {
  auto b = BackendRegistry::Default().Resolve("auto", kProblem, CpuDeviceInfo());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->name(), "cpu");
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
  DeviceInfo gpu;
  gpu.kind = DeviceKind::kCuda;
  gpu.cc_major = 9;
  for (const auto& v : BackendRegistry::Default().Verdicts(kProblem, gpu)) {
    if (v.backend->name() == "cpu") {
      EXPECT_EQ(v.support.message(), "cpu: runs on the host only; pick a GPU backend for a CUDA device");
    } else if (v.backend->name() == "cudnn") {  // kProblem is float32
      EXPECT_EQ(v.support.message(), "cudnn: cuDNN SDPA requires bfloat16 or float16 input; got float32");
    } else if (v.backend->name() == "cudnn_fp8") {
      EXPECT_EQ(v.support.message(),
                "cudnn_fp8: takes bfloat16 or float16 input (quantised to E4M3 on the device); got float32");
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
