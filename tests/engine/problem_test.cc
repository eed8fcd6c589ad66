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

TEST(ValidateProblem, TakesOneKvLengthPerBatchElementIn1ToS) {
  AttentionProblem p = Good();  // B = 4, S = 128
  p.kv_lens = {1, 128, 7, 64};
  EXPECT_TRUE(ValidateProblem(p).ok());
  p.kv_lens = {1, 2, 3};
  absl::Status s = ValidateProblem(p);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "kv_lens has 3 values; B = 4 (one per batch element, or none)");
  p.kv_lens = {1, 2, 3, 4, 5};
  EXPECT_EQ(ValidateProblem(p).message(),
            "kv_lens has 5 values; B = 4 (one per batch element, or none)");
  for (int32_t bad : {0, -1, 129, std::numeric_limits<int32_t>::min()}) {
    p.kv_lens = {5, 6, 7, bad};
    s = ValidateProblem(p);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), "kv_lens[3] = " + std::to_string(bad) + " is outside 1..S (S = 128)");
  }
  p.kv_lens = {0, 1, 1, 1};  // the first bad one is named
  EXPECT_EQ(ValidateKvLens(p).message(), "kv_lens[0] = 0 is outside 1..S (S = 128)");
}

TEST(AttentionProblem, ToStringShowsTheLengthsCompactly) {
  AttentionProblem p = Good();
  p.kv_lens = {1, 128, 7, 64};
  EXPECT_EQ(p.ToString(), "B=4 T=128 S=128 N=8 K=8 H=64 bfloat16 kv_lens=[1,128,7,64]");
  p.batch = 9;
  p.kv_lens = {3, 1, 128, 5, 5, 5, 5, 5, 5};
  EXPECT_EQ(p.ToString(), "B=9 T=128 S=128 N=8 K=8 H=64 bfloat16 kv_lens=[1..128] ragged");
  p.kv_lens.assign(9, 77);
  EXPECT_EQ(p.ToString(), "B=9 T=128 S=128 N=8 K=8 H=64 bfloat16 kv_lens=[all 77]");
}

TEST(AttentionProblem, FlopsAndBytesCountTheKeysEachSequenceSees) {
  AttentionProblem p = AttentionProblem::SelfAttention(3, 16, 8, 64, DType::kBFloat16, false, 2);
  p.kv_len = 1000;
  const AttentionProblem dense = p;
  // Lengths of S are the problem without lengths.
  p.kv_lens = {1000, 1000, 1000};
  EXPECT_EQ(TotalKvLen(p), TotalKvLen(dense));
  EXPECT_DOUBLE_EQ(AttentionFlops(p), AttentionFlops(dense));
  EXPECT_DOUBLE_EQ(AttentionMinBytes(p), AttentionMinBytes(dense));
  p.kv_lens = {1, 999, 500};
  EXPECT_EQ(TotalKvLen(p), 1500);
  EXPECT_EQ(p.KvLenAt(1), 999);
  EXPECT_EQ(dense.KvLenAt(1), 1000);
  EXPECT_DOUBLE_EQ(AttentionFlops(p), 4.0 * 8 * 16 * 1500 * 64);
  p.causal = true;  // halved, as without lengths
  EXPECT_DOUBLE_EQ(AttentionFlops(p), 2.0 * 8 * 16 * 1500 * 64);
  // K and V: 1500 rows of K*H = 2*64 elements each; Q and out: 3*16*8*64 each; 2 bytes.
  EXPECT_DOUBLE_EQ(KeyValueBytesRead(p), 2.0 * 2 * 1500 * 2 * 64);
  EXPECT_DOUBLE_EQ(AttentionMinBytes(p), 2.0 * 2 * 3 * 16 * 8 * 64 + KeyValueBytesRead(p));
  EXPECT_DOUBLE_EQ(KeyValueBytesRead(dense), 2.0 * 2 * 3000 * 2 * 64);
  // WithAllKeys: the problem without lengths, everything else kept.
  const AttentionProblem all = WithAllKeys(p);
  EXPECT_TRUE(all.kv_lens.empty());
  EXPECT_EQ(all.ToString(), "B=3 T=16 S=1000 N=8 K=2 H=64 bfloat16 causal");
  EXPECT_DOUBLE_EQ(AttentionFlops(all), 2.0 * 3 * 8 * 16 * 1000 * 64);
}

TEST(AttentionProblem, DefaultScaleIsInverseSqrtHeadDim) {
  AttentionProblem p = Good();
  EXPECT_DOUBLE_EQ(p.EffectiveScale(), 0.125);
  p.scale = 0.5;
  EXPECT_DOUBLE_EQ(p.EffectiveScale(), 0.5);
}

}  // namespace
}  // namespace attn
