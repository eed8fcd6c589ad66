#include "proto/convert.h"

namespace attn {
namespace v1 = ::attention::v1;

v1::DType DTypeToProto(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return v1::FLOAT32;
    case DType::kBFloat16:
      return v1::BFLOAT16;
    case DType::kFloat16:
      return v1::FLOAT16;
  }
  return v1::DTYPE_UNSPECIFIED;
}

void ShapeToProto(const AttentionProblem& p, v1::Shape* s) {
  s->set_batch(p.batch);
  s->set_q_len(p.q_len);
  s->set_kv_len(p.kv_len);
  s->set_num_heads(p.num_heads);
  s->set_num_kv_heads(p.num_kv_heads);
  s->set_head_dim(p.head_dim);
}

}  // namespace attn
