#include "attn/inputs.h"
#include "inputs/normal.h"

namespace attn {

absl::Status FillNormalHost(void* dst, int64_t count, DType dtype, uint64_t seed,
                            const StopToken* stop) {
  constexpr int64_t kElementsPerStopCheck = int64_t{1} << 20;  // a few ms on the host
  for (int64_t i = 0; i < count; ++i) {
    if (stop != nullptr && i % kElementsPerStopCheck == 0) {
      if (auto s = stop->Check(); !s.ok()) return s;
    }
    StoreFromDouble(dst, dtype, i, NormalAt(seed, static_cast<uint64_t>(i)));
  }
  return absl::OkStatus();
}

}  // namespace attn
