// Tensor views are checked against the problem before anything runs.
#include "attn/tensor.h"

#include <cstring>
#include <vector>

#include "attn/attention.h"
#include "attn/registry.h"
#include "gtest/gtest.h"

namespace attn {
namespace {

class TensorRules : public ::testing::Test {
 protected:
  TensorRules() : buffers_(4, std::vector<float>(kElems)) {
    p_.kv_len = 6;
    for (int i = 0; i < 4; ++i) {
      const bool q_like = i == 0 || i == 3;
      views_[i] = TensorView::Contiguous(buffers_[i].data(), kElems * 4, p_.dtype,
                                         MemoryKind::kHost, 2, q_like ? 5 : 6, q_like ? 4 : 2, 8);
    }
  }
  AttentionTensors Tensors() const { return {views_[0], views_[1], views_[2], views_[3]}; }
  static constexpr int64_t kElems = 2 * 6 * 4 * 8;
  AttentionProblem p_ = AttentionProblem::SelfAttention(2, 5, 4, 8, DType::kFloat32, false, 2);
  std::vector<std::vector<float>> buffers_;
  TensorView views_[4];
};

TEST_F(TensorRules, AcceptsPackedViews) { EXPECT_TRUE(ValidateTensors(Tensors(), p_).ok()); }

TEST_F(TensorRules, RejectsAShapeThatDoesNotMatchTheProblem) {
  views_[1].shape[1] = 5;
  const absl::Status s = ValidateTensors(Tensors(), p_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "k: shape (2, 5, 2, 8) does not match the problem's (B, S, K, H) = (2, 6, 2, 8)");
}

TEST_F(TensorRules, RejectsAMismatchedDtype) {
  views_[0].dtype = DType::kBFloat16;
  EXPECT_EQ(ValidateTensors(Tensors(), p_).message(),
            "q: dtype bfloat16 does not match the problem's float32");
}

TEST_F(TensorRules, RejectsANonContiguousHeadDim) {
  views_[2].strides[3] = 2;
  EXPECT_EQ(ValidateTensors(Tensors(), p_).message(),
            "v: stride of the head dimension must be 1 (contiguous H), got 2");
}

TEST_F(TensorRules, RejectsZeroOrNegativeStrides) {
  views_[3].strides[1] = 0;
  EXPECT_EQ(ValidateTensors(Tensors(), p_).message(), "out: strides[1] must be >= 1, got 0");
  views_[3].strides[1] = -32;
  EXPECT_EQ(ValidateTensors(Tensors(), p_).message(), "out: strides[1] must be >= 1, got -32");
}

TEST_F(TensorRules, RejectsABufferSmallerThanShapeAndStrides) {
  views_[0].capacity_bytes = 2 * 5 * 4 * 8 * 4 - 1;
  EXPECT_EQ(ValidateTensors(Tensors(), p_).message(),
            "q: shape and strides reach 1280 bytes but the buffer holds 1279");
  views_[0].capacity_bytes = kElems * 4;
  views_[0].strides[0] = 1000;  // batch 1 starts beyond the buffer
  EXPECT_EQ(ValidateTensors(Tensors(), p_).message(),
            "q: shape and strides reach 4640 bytes but the buffer holds 1536");
}

TEST_F(TensorRules, RejectsStridesWhoseExtentOverflows) {
  views_[1].strides[0] = int64_t{1} << 62;
  views_[1].strides[1] = int64_t{1} << 62;
  EXPECT_EQ(ValidateTensors(Tensors(), p_).message(),
            "k: strides address beyond int64 (largest offset overflows)");
}

TEST_F(TensorRules, RejectsANullPointer) {
  views_[2].data = nullptr;
  EXPECT_EQ(ValidateTensors(Tensors(), p_).message(), "v: data is null");
}

TEST_F(TensorRules, RejectsAnOutputThatAliasesAnInput) {
  views_[3].data = buffers_[0].data();
  EXPECT_EQ(ValidateTensors(Tensors(), p_).message(),
            "out: overlaps q; the output must not alias an input");
}

TEST_F(TensorRules, RejectsMixedMemoryKinds) {
  views_[1].memory = MemoryKind::kDevice;
  EXPECT_EQ(ValidateTensors(Tensors(), p_).message(),
            "k: lives in device memory but out in host; all tensors of a call must share one "
            "memory kind");
}

TEST_F(TensorRules, KvLensAreRequiredExactlyWhenTheProblemHasThem) {
  const int32_t lens[2] = {3, 6};
  AttentionTensors t = Tensors();
  t.kv_lens = lens;
  EXPECT_EQ(ValidateTensors(t, p_).message(),
            "kv_lens: tensors.kv_lens is set but the problem has no kv_lens; set both or neither");
  p_.kv_lens = {3, 6};
  EXPECT_TRUE(ValidateTensors(t, p_).ok());
  EXPECT_EQ(ValidateTensors(Tensors(), p_).message(),
            "kv_lens: the problem has 2 lengths but tensors.kv_lens is null");
}

TEST_F(TensorRules, HostKvLensMustEqualTheProblems) {
  p_.kv_lens = {3, 6};
  const int32_t lens[2] = {3, 5};
  AttentionTensors t = Tensors();
  t.kv_lens = lens;
  EXPECT_EQ(ValidateTensors(t, p_).message(),
            "kv_lens[1]: tensors.kv_lens holds 5 but the problem's is 6");
  // Device memory cannot be read here: its values are the kernels' to clamp.
  for (TensorView* v : {&t.q, &t.k, &t.v, &t.out}) v->memory = MemoryKind::kDevice;
  EXPECT_TRUE(ValidateTensors(t, p_).ok());
}

TEST_F(TensorRules, RejectsAnOutputThatAliasesTheKvLens) {
  p_.kv_lens = {3, 6};
  AttentionTensors t = Tensors();
  std::memcpy(buffers_[3].data() + 4, p_.kv_lens.data(), 8);
  t.kv_lens = reinterpret_cast<const int32_t*>(buffers_[3].data() + 4);
  EXPECT_EQ(ValidateTensors(t, p_).message(),
            "out: overlaps kv_lens; the output must not alias an input");
}

TEST_F(TensorRules, PackedTensorsCarryTheKvLens) {
  p_.kv_lens = {3, 6};
  const AttentionTensors t =
      PackedTensors(p_, MemoryKind::kHost, buffers_[0].data(), buffers_[1].data(),
                    buffers_[2].data(), buffers_[3].data(), p_.kv_lens.data());
  EXPECT_EQ(t.kv_lens, p_.kv_lens.data());
  EXPECT_TRUE(ValidateTensors(t, p_).ok());
  EXPECT_EQ(PackedTensors(p_, MemoryKind::kHost, buffers_[0].data(), buffers_[1].data(),
                          buffers_[2].data(), buffers_[3].data())
                .kv_lens,
            nullptr);
}

TEST_F(TensorRules, RunAttentionRefusesBeforeTouchingAnything) {
  auto ctx = DeviceContext::CreateCpu({int64_t{1} << 20});
  ASSERT_TRUE(ctx.ok());
  const Backend* cpu = BackendRegistry::Default().Find("cpu");
  std::vector<float> sentinel(buffers_[3]);
  for (auto& x : buffers_[3]) x = 42.f;
  views_[1].shape[2] = 3;
  EXPECT_EQ(RunAttention(*cpu, p_, Tensors(), **ctx).code(), absl::StatusCode::kInvalidArgument);
  for (float x : buffers_[3]) ASSERT_EQ(x, 42.f);  // out untouched
  // Device-memory views on the CPU context are refused too.
  views_[1].shape[2] = 2;
  for (auto& v : views_) v.memory = MemoryKind::kDevice;
  const absl::Status s = RunAttention(*cpu, p_, Tensors(), **ctx);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("device memory but the context runs on cpu"), absl::string_view::npos)
      << s;
}

TEST_F(TensorRules, RunAttentionReportsAWorkspaceThatDoesNotFit) {
  auto ctx =
      DeviceContext::CreateCpu({1024});  // reference needs (320 + 2*192) doubles = 5632 bytes
  ASSERT_TRUE(ctx.ok());
  const Backend* cpu = BackendRegistry::Default().Find("reference");
  const absl::Status s = RunAttention(*cpu, p_, Tensors(), **ctx);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("5632 bytes needed"), absl::string_view::npos) << s;
}

}  // namespace
}  // namespace attn
