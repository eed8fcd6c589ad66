// The packed buffers of one call and their generated inputs, on any DeviceContext: what Attend,
// the benchmark runner, attn-bench and the server's start-up measurements all take.
#include "absl/strings/str_format.h"
#include "attn/inputs.h"
#include "platform.h"

namespace attn {

absl::Status FillNormal(DeviceContext& context, void* dst, int64_t count, DType dtype,
                        uint64_t seed, const StopToken* stop) {
  if (context.info().kind == DeviceKind::kCuda) {
    return FillNormalOnStream(context.stream(), dst, count, dtype, seed);
  }
  return FillNormalHost(dst, count, dtype, seed, stop);
}

absl::StatusOr<PackedBuffers> AllocatePacked(const AttentionProblem& p, DeviceContext& context) {
  const int64_t e = DTypeSize(p.dtype);
  const int64_t qb = QueryElements(p) * e, kvb = KeyValueElements(p) * e;
  const int64_t lens_bytes = static_cast<int64_t>(p.kv_lens.size() * sizeof(int32_t));
  PackedBuffers out;
  for (int64_t bytes : {qb, kvb, kvb, qb, lens_bytes}) {
    if (bytes == 0) break;  // no kv_lens
    auto block = context.arena().Allocate(bytes);
    if (!block.ok()) return block.status();
    out.blocks.push_back(*std::move(block));
  }
  int32_t* kv_lens = nullptr;
  if (lens_bytes > 0) {
    kv_lens = static_cast<int32_t*>(out.blocks[4].data());
    if (auto s = context.CopyToDevice(kv_lens, p.kv_lens.data(), lens_bytes); !s.ok()) return s;
  }
  out.tensors = PackedTensors(p, context.memory(), out.blocks[0].data(), out.blocks[1].data(),
                              out.blocks[2].data(), out.blocks[3].data(), kv_lens);
  return out;
}

absl::Status FillInputs(DeviceContext& context, const AttentionProblem& p,
                        const AttentionTensors& t, uint64_t seed, const StopToken* stop) {
  const TensorView* inputs[3] = {&t.q, &t.k, &t.v};
  for (int i = 0; i < 3; ++i) {
    const int64_t count = inputs[i]->capacity_bytes / DTypeSize(p.dtype);
    if (auto s = FillNormal(context, inputs[i]->data, count, p.dtype, InputSeed(seed, 0, i), stop);
        !s.ok())
      return s;
  }
  return absl::OkStatus();
}

}  // namespace attn
