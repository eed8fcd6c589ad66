#include "attn/tensor.h"

#include <limits>

#include "absl/strings/str_format.h"

namespace attn {

TensorView TensorView::Contiguous(void* data, int64_t capacity_bytes, DType dtype,
                                  MemoryKind memory, int64_t b, int64_t l, int64_t heads,
                                  int64_t h) {
  TensorView v;
  v.data = data;
  v.capacity_bytes = capacity_bytes;
  v.dtype = dtype;
  v.memory = memory;
  v.shape = {b, l, heads, h};
  v.strides = {l * heads * h, heads * h, h, 1};
  return v;
}

AttentionTensors PackedTensors(const AttentionProblem& p, MemoryKind memory, void* q, void* k,
                               void* v, void* out, const int32_t* kv_lens) {
  const int64_t e = DTypeSize(p.dtype);
  const int64_t qb = QueryElements(p) * e, kvb = KeyValueElements(p) * e;
  return {
      TensorView::Contiguous(q, qb, p.dtype, memory, p.batch, p.q_len, p.num_heads, p.head_dim),
      TensorView::Contiguous(k, kvb, p.dtype, memory, p.batch, p.kv_len, p.num_kv_heads,
                             p.head_dim),
      TensorView::Contiguous(v, kvb, p.dtype, memory, p.batch, p.kv_len, p.num_kv_heads,
                             p.head_dim),
      TensorView::Contiguous(out, qb, p.dtype, memory, p.batch, p.q_len, p.num_heads, p.head_dim),
      kv_lens};
}

namespace {

// Byte range [begin, end) a validated view can touch.
struct ByteRange {
  uintptr_t begin, end;
};

ByteRange Extent(const TensorView& v) {
  int64_t last = 0;
  for (int i = 0; i < 4; ++i) last += (v.shape[i] - 1) * v.strides[i];
  const auto begin = reinterpret_cast<uintptr_t>(v.data);
  return {begin, begin + static_cast<uintptr_t>((last + 1) * DTypeSize(v.dtype))};
}

// tensors.kv_lens against the problem's: present iff it has lengths, clear of out, and in host
// memory (where they can be read here) the same values.
absl::Status ValidateKvLensTensor(const AttentionTensors& t, const AttentionProblem& p) {
  if (p.kv_lens.empty()) {
    if (t.kv_lens == nullptr) return absl::OkStatus();
    return absl::InvalidArgumentError(
        "kv_lens: tensors.kv_lens is set but the problem has no kv_lens; set both or neither");
  }
  if (t.kv_lens == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "kv_lens: the problem has %d lengths but tensors.kv_lens is null", p.kv_lens.size()));
  }
  const auto begin = reinterpret_cast<uintptr_t>(t.kv_lens);
  const ByteRange lens{begin, begin + p.kv_lens.size() * sizeof(int32_t)};
  const ByteRange out = Extent(t.out);
  if (lens.begin < out.end && out.begin < lens.end) {
    return absl::InvalidArgumentError("out: overlaps kv_lens; the output must not alias an input");
  }
  if (t.out.memory != MemoryKind::kHost) return absl::OkStatus();
  for (size_t b = 0; b < p.kv_lens.size(); ++b) {
    if (t.kv_lens[b] != p.kv_lens[b]) {
      return absl::InvalidArgumentError(
          absl::StrFormat("kv_lens[%d]: tensors.kv_lens holds %d but the problem's is %d", b,
                          t.kv_lens[b], p.kv_lens[b]));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateTensor(const TensorView& v, const AttentionProblem& p, const char* name) {
  const bool is_query_like = name[0] == 'q' || name[0] == 'o';
  const std::array<int64_t, 4> want =
      is_query_like ? std::array<int64_t, 4>{p.batch, p.q_len, p.num_heads, p.head_dim}
                    : std::array<int64_t, 4>{p.batch, p.kv_len, p.num_kv_heads, p.head_dim};
  const char* layout = is_query_like ? "(B, T, N, H)" : "(B, S, K, H)";
  if (v.data == nullptr)
    return absl::InvalidArgumentError(absl::StrFormat("%s: data is null", name));
  if (v.dtype != p.dtype) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: dtype %s does not match the problem's %s", name, DTypeName(v.dtype),
                        DTypeName(p.dtype)));
  }
  if (v.shape != want) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: shape (%d, %d, %d, %d) does not match the problem's %s = (%d, %d, %d, %d)", name,
        v.shape[0], v.shape[1], v.shape[2], v.shape[3], layout, want[0], want[1], want[2],
        want[3]));
  }
  if (v.strides[3] != 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: stride of the head dimension must be 1 (contiguous H), got %d", name, v.strides[3]));
  }
  for (int i = 0; i < 3; ++i) {
    if (v.strides[i] < 1) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: strides[%d] must be >= 1, got %d", name, i, v.strides[i]));
    }
  }
  // Offset of the last element, accumulated with overflow checks.
  int64_t last = 0;
  for (int i = 0; i < 4; ++i) {
    auto term = CheckedMul(v.shape[i] - 1, v.strides[i], "tensor extent");
    if (!term.ok() || last > std::numeric_limits<int64_t>::max() - *term) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: strides address beyond int64 (largest offset overflows)", name));
    }
    last += *term;
  }
  auto needed = CheckedMul(last + 1, DTypeSize(v.dtype), "tensor bytes");
  if (!needed.ok()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: byte extent overflows int64", name));
  }
  if (*needed > v.capacity_bytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: shape and strides reach %d bytes but the buffer holds %d", name,
                        *needed, v.capacity_bytes));
  }
  return absl::OkStatus();
}

absl::Status ValidateTensors(const AttentionTensors& t, const AttentionProblem& p) {
  if (auto s = ValidateTensor(t.q, p, "q"); !s.ok()) return s;
  if (auto s = ValidateTensor(t.k, p, "k"); !s.ok()) return s;
  if (auto s = ValidateTensor(t.v, p, "v"); !s.ok()) return s;
  if (auto s = ValidateTensor(t.out, p, "out"); !s.ok()) return s;
  const TensorView* inputs[] = {&t.q, &t.k, &t.v};
  const char* names[] = {"q", "k", "v"};
  for (int i = 0; i < 3; ++i) {
    if (inputs[i]->memory != t.out.memory) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: lives in %s memory but out in %s; all tensors of a call must share "
                          "one memory kind",
                          names[i], inputs[i]->memory == MemoryKind::kHost ? "host" : "device",
                          t.out.memory == MemoryKind::kHost ? "host" : "device"));
    }
    const ByteRange in = Extent(*inputs[i]);
    const ByteRange out = Extent(t.out);
    if (in.begin < out.end && out.begin < in.end) {
      return absl::InvalidArgumentError(
          absl::StrFormat("out: overlaps %s; the output must not alias an input", names[i]));
    }
  }
  return ValidateKvLensTensor(t, p);
}

}  // namespace attn
