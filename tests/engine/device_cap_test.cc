// The device cap (attn/device.h's SetDeviceCapOverride): what a capped device says of itself,
// and that the backends' rules and heuristics then take the L4's paths. Host code first (any
// machine), then on the GPU: contexts made after the call are capped, and the dispatch on one is
// the L4's.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attn/attention.h"
#include "attn/device.h"
#include "attn/overrides.h"
#include "attn/registry.h"
#include "engine/test_util.h"
#include "fused/heuristics.h"
#include "gtest/gtest.h"

namespace attn::testing {
namespace {

const DeviceInfo kH100 = FakeGpu(9, 0);
const DeviceInfo kCappedH100 = CappedDeviceInfo(kH100, DeviceCap::kSm89);

AttentionProblem Prefill(int64_t h) {
  return ProblemOf({4, 4096, 4096, 16, 16, h}, DType::kBFloat16, true);
}
AttentionProblem Decode(int64_t h) {
  return ProblemOf({16, 1, 8192, 32, 8, h}, DType::kBFloat16, false);
}

TEST(DeviceCap, NamesRoundTrip) {
  for (DeviceCap cap : kDeviceCaps) {
    EXPECT_EQ(DeviceCapNamed(DeviceCapName(cap)), cap) << DeviceCapName(cap);
  }
  EXPECT_EQ(DeviceCapName(DeviceCap::kSm89), "sm_89");
  EXPECT_EQ(DeviceCapNamed("sm89"), std::nullopt);
  EXPECT_EQ(DeviceCapNamed("89"), std::nullopt);
  EXPECT_EQ(DeviceCapNamed(""), std::nullopt);
}

// A capped H100 is the L4 the support-rule tests describe (FakeGpu(8, 9)) in every limit the
// backends read; its memory stays its own and its name says it is capped.
TEST(DeviceCap, MakesAHopperLookLikeAnL4) {
  const DeviceInfo l4 = FakeGpu(8, 9);
  EXPECT_EQ(kCappedH100.cc_major, 8);
  EXPECT_EQ(kCappedH100.cc_minor, 9);
  EXPECT_EQ(kCappedH100.shared_memory_per_block, 99 * 1024);
  EXPECT_EQ(kCappedH100.shared_memory_per_sm, 100 * 1024);
  EXPECT_EQ(kCappedH100.multiprocessors, 58);
  EXPECT_EQ(kCappedH100.shared_memory_per_block, l4.shared_memory_per_block);
  EXPECT_EQ(kCappedH100.shared_memory_per_sm, l4.shared_memory_per_sm);
  EXPECT_EQ(kCappedH100.multiprocessors, l4.multiprocessors);
  EXPECT_EQ(kCappedH100.total_memory_bytes, kH100.total_memory_bytes);
  EXPECT_EQ(kCappedH100.name, "test GPU [capped at sm_89]");
  EXPECT_EQ(kCappedH100.ToString(), "cuda:0 test GPU [capped at sm_89] (sm_89, 0.0 GiB, 58 SMs)");
}

// A cap lowers limits, never raises them: an A100 keeps its 8.0 and takes the L4's smaller shared
// memory and SM count; the CPU is not a CUDA device and is left as it is.
TEST(DeviceCap, OnlyLowersLimitsAndLeavesTheCpuAlone) {
  const DeviceInfo a100 = CappedDeviceInfo(FakeGpu(8, 0), DeviceCap::kSm89);
  EXPECT_EQ(a100.ComputeCapability(), 80);
  EXPECT_EQ(a100.shared_memory_per_block, 99 * 1024);
  EXPECT_EQ(a100.multiprocessors, 58);
  DeviceInfo small = FakeGpu(8, 9);
  small.multiprocessors = 20;
  small.shared_memory_per_block = 48 * 1024;
  const DeviceInfo capped = CappedDeviceInfo(small, DeviceCap::kSm89);
  EXPECT_EQ(capped.multiprocessors, 20);
  EXPECT_EQ(capped.shared_memory_per_block, 48 * 1024);
  const DeviceInfo cpu = CappedDeviceInfo(CpuDeviceInfo(), DeviceCap::kSm89);
  EXPECT_EQ(cpu.name, CpuDeviceInfo().name);
  EXPECT_EQ(cpu.cc_major, 0);
}

// The fused backend on a capped Hopper: mma.sync where the H100 takes the warp-specialised wgmma
// kernel (forcing wgmma changes nothing: the L4 has none), split-KV for decode without TMA or a
// dependent merge (compute capability 9.0 features), and H = 256 decode on mma.sync (the L4's
// 99 KiB holds no split-KV block of it).
TEST(DeviceCap, SteersTheFusedBackendOntoTheL4sKernels) {
  for (int64_t h : {64, 96, 128, 256}) {
    EXPECT_EQ(ChoosePath(Prefill(h), kCappedH100, std::nullopt), FusedPath::kMmaSync) << h;
    EXPECT_EQ(ChoosePath(Prefill(h), kCappedH100, FusedPath::kWgmmaWs), FusedPath::kMmaSync) << h;
  }
  if (FusedWgmmaBuilt(128)) {
    EXPECT_EQ(ChoosePath(Prefill(128), kH100, std::nullopt), FusedPath::kWgmmaWs);
  }
  EXPECT_EQ(ChoosePath(Decode(128), kCappedH100, std::nullopt), FusedPath::kSplitKv);
  const FusedSplitKv hopper = PlanSplitKv(Decode(128), kH100);
  const FusedSplitKv l4 = PlanSplitKv(Decode(128), kCappedH100);
  EXPECT_TRUE(hopper.tma);
  EXPECT_TRUE(hopper.dependent_merge);
  EXPECT_FALSE(l4.tma);
  EXPECT_FALSE(l4.dependent_merge);
  const FusedSplitKv fake_l4 = PlanSplitKv(Decode(128), FakeGpu(8, 9));
  EXPECT_EQ(l4.stages, fake_l4.stages);
  EXPECT_EQ(l4.splits, fake_l4.splits);
  EXPECT_EQ(ChoosePath(Decode(256), kH100, std::nullopt), FusedPath::kSplitKv);
  EXPECT_EQ(ChoosePath(Decode(256), kCappedH100, std::nullopt), FusedPath::kMmaSync);
}

// cuDNN's rules on a capped Hopper: head dims up to 128 (256 is Hopper's), so auto takes fused
// at H = 256; and no FP8 SDPA at all.
TEST(DeviceCap, HoldsTheCudnnBackendsToTheL4sRules) {
  if (!ATTN_HAVE_CUDNN) GTEST_SKIP() << "built without cuDNN (ATTN_ENABLE_CUDNN)";
  const BackendRegistry& registry = BackendRegistry::Default();
  const AttentionProblem h256 = Prefill(256);
  EXPECT_TRUE(registry.Find("cudnn")->CheckSupport(h256, kH100).ok());
  EXPECT_EQ(registry.Find("cudnn")->CheckSupport(h256, kCappedH100).message(),
            "cudnn: head_dim must be <= 128 on compute capability 8.9; got 256");
  EXPECT_EQ(registry.Resolve("auto", h256, kH100).value()->name(), "cudnn");
  EXPECT_EQ(registry.Resolve("auto", h256, kCappedH100).value()->name(), "fused");
  const AttentionProblem fp8 = Prefill(128);
  EXPECT_TRUE(registry.Find("cudnn_fp8")->CheckSupport(fp8, kH100).ok());
  const absl::Status refused = registry.Find("cudnn_fp8")->CheckSupport(fp8, kCappedH100);
  EXPECT_TRUE(IsUnsupported(refused)) << refused;
  EXPECT_EQ(refused.message(),
            "cudnn_fp8: no detected FP8 support; requires Hopper/Blackwell-class GPU (compute "
            "capability >= 9.0); device has 8.9");
}

// A context on GPU 0 made while the cap is set (the cap in force before is restored after).
std::unique_ptr<DeviceContext> CappedContext() {
  const std::optional<DeviceCap> before = DeviceCapOverride();
  SetDeviceCapOverride(DeviceCap::kSm89);
  DeviceContextOptions options;
  options.arena_bytes = int64_t{256} << 20;
  auto ctx = DeviceContext::CreateCuda(0, options);
  SetDeviceCapOverride(before);
  EXPECT_TRUE(ctx.ok()) << ctx.status();
  return ctx.ok() ? *std::move(ctx) : nullptr;
}

// Every context made after the call is capped; one made before keeps what it was told (the shared
// context is capped exactly when the run is: attn_engine_tests --device_cap=sm_89).
TEST(DeviceCapGpu, CapsContextsMadeAfterTheCall) {
  ATTN_REQUIRE_GPU();
  const auto capped = CappedContext();
  ASSERT_NE(capped, nullptr);
  const DeviceInfo& info = capped->info();
  EXPECT_LE(info.ComputeCapability(), 89);
  EXPECT_LE(info.shared_memory_per_block, 99 * 1024);
  EXPECT_LE(info.shared_memory_per_sm, 100 * 1024);
  EXPECT_LE(info.multiprocessors, 58);
  EXPECT_NE(info.name.find("[capped at sm_89]"), std::string::npos) << info.name;
  const bool run_capped = DeviceCapOverride().has_value();
  EXPECT_EQ(SharedGpuContext()->info().name.find("[capped at sm_89]") != std::string::npos,
            run_capped)
      << SharedGpuContext()->info().name;
  // A query now is capped as the run is.
  const DeviceInfo now = QueryCudaDevice(0).value();
  EXPECT_EQ(now.name == info.name, run_capped) << now.name;
}

// On a capped context the dispatch is the L4's: fused's automatic choice at a prefill shape is
// the mma.sync kernel (its bits; on an uncapped Hopper with wgmma built it is another kernel,
// whose bits differ), cudnn refuses H = 256 and cudnn_fp8 everything, each with its reason.
TEST(DeviceCapGpu, RunsTheL4sPathsOnACappedContext) {
  ATTN_REQUIRE_GPU();
  const auto capped = CappedContext();
  ASSERT_NE(capped, nullptr);
  const auto p = AttentionProblem::SelfAttention(2, 2048, 8, 128, DType::kBFloat16, true, 2);
  const Inputs in = RandomInputs(p, 71);
  auto automatic = RunOnGpu(in, "fused", *capped);
  SetFusedPathOverride(FusedPath::kMmaSync);
  auto mma_sync = RunOnGpu(in, "fused", *capped);
  SetFusedPathOverride(std::nullopt);
  ASSERT_TRUE(automatic.ok()) << automatic.status();
  ASSERT_TRUE(mma_sync.ok()) << mma_sync.status();
  EXPECT_EQ(*automatic, *mma_sync) << "the capped automatic choice is not the mma.sync kernel";
  EXPECT_TRUE(Compare(*automatic, Reference(in), ToleranceFor(p.dtype)).within);
  const DeviceInfo& shared = SharedGpuContext()->info();
  if (FusedWgmmaBuilt(128) && shared.cc_major == 9 && shared.cc_minor == 0) {
    auto hopper = RunOnGpu(in, "fused");
    ASSERT_TRUE(hopper.ok()) << hopper.status();
    EXPECT_NE(*hopper, *automatic) << "identical bits: did the uncapped context run wgmma?";
  }
  if (!ATTN_HAVE_CUDNN) return;
  const Inputs wide =
      RandomInputs(AttentionProblem::SelfAttention(1, 64, 2, 256, DType::kBFloat16), 72);
  auto cudnn = RunOnGpu(wide, "cudnn", *capped);
  EXPECT_TRUE(IsUnsupported(cudnn.status())) << cudnn.status();
  EXPECT_EQ(cudnn.status().message(),
            "cudnn: head_dim must be <= 128 on compute capability 8.9; got 256");
  auto fp8 = RunOnGpu(in, "cudnn_fp8", *capped);
  EXPECT_TRUE(IsUnsupported(fp8.status())) << fp8.status();
  EXPECT_NE(fp8.status().message().find("device has 8.9"), std::string::npos) << fp8.status();
}

}  // namespace
}  // namespace attn::testing
