// DeviceContext across threads and GPUs, as attn-server's workers use it: each worker thread
// owns a context it did not create, on any of the machine's GPUs.
#include "attn/device.h"

#include <string>
#include <thread>
#include <vector>

#include "engine/test_util.h"
#include "gtest/gtest.h"

namespace attn::testing {
namespace {

TEST(DeviceContext, MakeCurrentOnTheCpuIsANoOp) {
  EXPECT_TRUE(SharedCpuContext().MakeCurrent().ok());
}

// A new thread starts on GPU 0. On the machine's last GPU, from such a thread, every GPU backend
// gives GPU 0's bits once the thread has made the context current (the cuDNN handles and the FP8
// backend's second stream are made there, on first use).
TEST(DeviceContext, ServesTheLastGpuFromAnotherThread) {
  ATTN_REQUIRE_GPU();
  const int gpus = CudaDeviceCount();
  if (gpus < 2) GTEST_SKIP() << "one CUDA device: needs two to tell a wrong current device apart";
  DeviceContextOptions options;
  options.arena_bytes = int64_t{1} << 30;
  auto last = DeviceContext::CreateCuda(gpus - 1, options);
  ASSERT_TRUE(last.ok()) << last.status();
  const auto p = AttentionProblem::SelfAttention(2, 256, 4, 128, DType::kBFloat16, true);
  const Inputs in = RandomInputs(p, 9);
  const std::vector<std::string> backends = {"naive", "fused", "cudnn", "cudnn_fp8"};
  std::vector<absl::StatusOr<std::vector<double>>> got(backends.size(),
                                                       absl::UnknownError("not run"));
  absl::Status made_current;
  std::thread worker([&] {
    made_current = (*last)->MakeCurrent();
    if (!made_current.ok()) return;
    for (size_t i = 0; i < backends.size(); ++i) got[i] = RunOnGpu(in, backends[i], **last);
  });
  worker.join();
  ASSERT_TRUE(made_current.ok()) << made_current;
  for (size_t i = 0; i < backends.size(); ++i) {
    auto want = RunOnGpu(in, backends[i]);
    if (!want.ok()) {
      EXPECT_FALSE(got[i].ok()) << backends[i] << " ran on GPU " << gpus - 1 << " only";
      continue;  // not on this machine (e.g. cudnn_fp8 below cc 9.0): same verdict on both
    }
    ASSERT_TRUE(got[i].ok()) << backends[i] << ": " << got[i].status();
    EXPECT_EQ(*got[i], *want) << backends[i] << " on GPU " << gpus - 1 << " vs GPU 0";
  }
}

}  // namespace
}  // namespace attn::testing
