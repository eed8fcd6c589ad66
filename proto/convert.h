// Host values as attention.v1 messages: the one mapping the server and the client share.
#pragma once

#include "attention/v1/attention.pb.h"
#include "attn/dtype.h"
#include "attn/problem.h"

namespace attn {

attention::v1::DType DTypeToProto(DType dtype);
// S and K as the problem holds them (never 0: the engine has already resolved the defaults).
void ShapeToProto(const AttentionProblem& problem, attention::v1::Shape* shape);

}  // namespace attn
