// Problem rules shared by every backend: each returns InvalidArgument naming the field.
#include "attn/problem.h"

#include <limits>

#include "gtest/gtest.h"

namespace attn {
namespace {

AttentionProblem Good() { return AttentionProblem::SelfAttention(4, 128, 8, 64, DType::kBFloat16); }

TEST(ValidateProblem, AcceptsTheCodelabShape) { EXPECT_TRUE(ValidateProblem(Good()).ok()); }

TEST(ValidateProblem, RejectsZeroAndNegativeDimensions) {
  const struct {
    int64_t AttentionProblem::*field;
    const char* name;
  } fields[] = {{&AttentionProblem::batch, "batch"},
                {&AttentionProblem::q_len, "q_len"},
                {&AttentionProblem::kv_len, "kv_len"},
                {&AttentionProblem::num_heads, "num_heads"},
                {&AttentionProblem::num_kv_heads, "num_kv_heads"},
                {&AttentionProblem::head_dim, "head_dim"}};
  for (const auto& f : fields) {
    for (int64_t bad : {int64_t{0}, int64_t{-3}}) {
      AttentionProblem p = Good();
      p.*f.field = bad;
      const absl::Status s = ValidateProblem(p);
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_EQ(s.message(), std::string(f.name) + ": must be >= 1, got " + std::to_string(bad));
    }
  }
}

TEST(ValidateProblem, RejectsHeadsNotAMultipleOfKvHeads) {
  AttentionProblem p = Good();
  p.num_kv_heads = 3;
  const absl::Status s = ValidateProblem(p);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "num_kv_heads: num_heads (8) must be a multiple of num_kv_heads (3) for GQA/MQA");
}

TEST(ValidateProblem, RejectsElementCountsThatOverflowInt64) {
  AttentionProblem p = Good();
  p.batch = int64_t{1} << 40;
  p.q_len = int64_t{1} << 20;  // B*T*N*H*2 = 2^(40+20+3+6+1) = 2^70
  p.kv_len = 1;
  absl::Status s = ValidateProblem(p);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("q/out bytes (B*T*N*H*dtype size) overflows int64"), std::string::npos)
      << s;

  p = Good();
  p.q_len = std::numeric_limits<int64_t>::max() / 2;  // each operand's product fits...
  p.batch = 1;
  p.num_heads = 1;
  p.num_kv_heads = 1;
  p.head_dim = 1;
  s = ValidateProblem(p);
  EXPECT_NE(s.message().find("overflows int64"), std::string::npos) << s;

  p = Good();
  p.q_len = int64_t{1} << 28;
  p.kv_len = int64_t{1} << 28;  // Q and K fit, B*N*T*S*4 = 2^(2+3+28+28+2) = 2^63 does not
  s = ValidateProblem(p);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("score bytes (B*N*T*S*4) overflows int64"), std::string::npos) << s;
}

TEST(ValidateProblem, RejectsNonPositiveOrNonFiniteScale) {
  for (double bad : {0.0, -1.0, std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN()}) {
    AttentionProblem p = Good();
    p.scale = bad;
    const absl::Status s = ValidateProblem(p);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(s.message().substr(0, 33), "scale: must be finite and > 0, go");
  }
}

TEST(AttentionProblem, FlopsFollowOneFormula) {
  AttentionProblem p = AttentionProblem::SelfAttention(4, 1024, 8, 64, DType::kFloat32);
  EXPECT_DOUBLE_EQ(AttentionFlops(p), 4.0 * 4 * 8 * 1024 * 1024 * 64);
  p.causal = true;
  EXPECT_DOUBLE_EQ(AttentionFlops(p), 2.0 * 4 * 8 * 1024 * 1024 * 64);
  p.dtype = DType::kBFloat16;
  p.num_kv_heads = 2;
  // Q and out: 4*1024*8*64 each; K and V: 4*1024*2*64 each; 2 bytes per element.
  EXPECT_DOUBLE_EQ(AttentionMinBytes(p), 2.0 * (2 * 4 * 1024 * 8 * 64 + 2 * 4 * 1024 * 2 * 64));
}

TEST(AttentionProblem, DefaultScaleIsInverseSqrtHeadDim) {
  AttentionProblem p = Good();
  EXPECT_DOUBLE_EQ(p.EffectiveScale(), 0.125);
  p.scale = 0.5;
  EXPECT_DOUBLE_EQ(p.EffectiveScale(), 0.5);
}

}  // namespace
}  // namespace attn
