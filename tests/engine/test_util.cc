#include "engine/test_util.h"

#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <utility>

#include "absl/strings/str_format.h"
#include "attn/attention.h"
#include "attn/registry.h"
#include "engine/reference.h"

namespace attn::testing {

HostOperand MakeOperand(std::vector<double> values, DType dtype) {
  HostOperand op;
  op.bytes.resize(values.size() * static_cast<size_t>(DTypeSize(dtype)));
  for (size_t i = 0; i < values.size(); ++i) {
    StoreFromDouble(op.bytes.data(), dtype, static_cast<int64_t>(i), values[i]);
  }
  op.values = Decode(op.bytes, dtype);
  return op;
}

HostOperand RandomOperand(int64_t count, DType dtype, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> values(static_cast<size_t>(count));
  for (auto& x : values) x = normal(rng);
  return MakeOperand(std::move(values), dtype);
}

std::vector<double> Decode(const std::vector<uint8_t>& bytes, DType dtype) {
  std::vector<double> out(bytes.size() / static_cast<size_t>(DTypeSize(dtype)));
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = LoadAsDouble(bytes.data(), dtype, static_cast<int64_t>(i));
  }
  return out;
}

Inputs RandomInputs(const AttentionProblem& p, uint64_t seed) {
  return {p, RandomOperand(QueryElements(p), p.dtype, seed * 3 + 1),
          RandomOperand(KeyValueElements(p), p.dtype, seed * 3 + 2),
          RandomOperand(KeyValueElements(p), p.dtype, seed * 3 + 3)};
}

std::vector<double> Reference(const Inputs& in) {
  return ReferenceAttention(in.problem, in.q.values, in.k.values, in.v.values);
}

namespace {

absl::StatusOr<const Backend*> Lookup(const std::string& name, const AttentionProblem& p,
                                      const DeviceInfo& device) {
  return BackendRegistry::Default().Resolve(name, p, device);
}

}  // namespace

DeviceContext& SharedCpuContext() {
  static DeviceContext* cpu = [] {
    DeviceContextOptions options;
    options.arena_bytes = int64_t{1} << 30;
    return DeviceContext::CreateCpu(options).value().release();
  }();
  return *cpu;
}

absl::StatusOr<std::vector<double>> RunOnCpu(const Inputs& in, const std::string& backend,
                                             const RunOptions& options) {
  DeviceContext* cpu = &SharedCpuContext();
  const AttentionProblem& p = in.problem;
  auto b = Lookup(backend, p, cpu->info());
  if (!b.ok()) return b.status();
  std::vector<uint8_t> q = in.q.bytes, k = in.k.bytes, v = in.v.bytes;
  std::vector<uint8_t> out(q.size(), 0xff);
  std::vector<int32_t> kv_lens = p.kv_lens;
  if (auto s = RunAttention(**b, p,
                            PackedTensors(p, MemoryKind::kHost, q.data(), k.data(), v.data(),
                                          out.data(), kv_lens.empty() ? nullptr : kv_lens.data()),
                            *cpu, options);
      !s.ok()) {
    return s;
  }
  return Decode(out, p.dtype);
}

absl::StatusOr<DeviceKvLens> UploadKvLens(const AttentionProblem& p, DeviceContext& gpu) {
  DeviceKvLens out;
  if (p.kv_lens.empty()) return out;
  const int64_t bytes = static_cast<int64_t>(p.kv_lens.size() * sizeof(int32_t));
  auto block = gpu.arena().Allocate(bytes);
  if (!block.ok()) return block.status();
  if (auto s = gpu.CopyToDevice(block->data(), p.kv_lens.data(), bytes); !s.ok()) return s;
  out.data = static_cast<const int32_t*>(block->data());
  out.block = *std::move(block);
  return out;
}

AttentionProblem WithRandomKvLens(AttentionProblem p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> len(1, p.kv_len);
  p.kv_lens.resize(static_cast<size_t>(p.batch));
  for (int64_t b = 0; b < p.batch; ++b) {
    p.kv_lens[b] = static_cast<int32_t>(b == 0 ? 1 : b == 1 ? p.kv_len : len(rng));
  }
  return p;
}

DeviceContext* SharedGpuContext() {
  static DeviceContext* gpu = []() -> DeviceContext* {
    if (CudaDeviceCount() == 0) return nullptr;
    DeviceContextOptions options;
    options.arena_bytes = int64_t{8} << 30;
    auto ctx = DeviceContext::CreateCuda(0, options);
    if (!ctx.ok()) {
      ADD_FAILURE() << "a CUDA device is present but no context could be made: " << ctx.status();
      return nullptr;
    }
    return ctx->release();
  }();
  return gpu;
}

absl::StatusOr<std::vector<double>> RunOnGpu(const Inputs& in, const std::string& backend) {
  DeviceContext* gpu = SharedGpuContext();
  if (gpu == nullptr) return absl::FailedPreconditionError("no CUDA device");
  return RunOnGpu(in, backend, *gpu);
}

absl::StatusOr<std::vector<double>> RunOnGpu(const Inputs& in, const std::string& backend,
                                             DeviceContext& gpu, const RunOptions& options) {
  const AttentionProblem& p = in.problem;
  auto b = Lookup(backend, p, gpu.info());
  if (!b.ok()) return b.status();
  auto q = gpu.arena().Allocate(static_cast<int64_t>(in.q.bytes.size()));
  auto k = gpu.arena().Allocate(static_cast<int64_t>(in.k.bytes.size()));
  auto v = gpu.arena().Allocate(static_cast<int64_t>(in.v.bytes.size()));
  auto out = gpu.arena().Allocate(static_cast<int64_t>(in.q.bytes.size()));
  for (auto* block : {&q, &k, &v, &out}) {
    if (!block->ok()) return block->status();
  }
  std::vector<uint8_t> result(in.q.bytes.size(), 0xff);  // all-ones: NaN in every dtype
  for (auto [block, src] : {std::pair{&q, in.q.bytes.data()},
                            {&k, in.k.bytes.data()},
                            {&v, in.v.bytes.data()},
                            {&out, result.data()}}) {
    if (auto s = gpu.CopyToDevice((*block)->data(), src, (*block)->size()); !s.ok()) return s;
  }
  auto kv_lens = UploadKvLens(p, gpu);
  if (!kv_lens.ok()) return kv_lens.status();
  if (auto s = RunAttention(**b, p,
                            PackedTensors(p, MemoryKind::kDevice, q->data(), k->data(), v->data(),
                                          out->data(), kv_lens->data),
                            gpu, options);
      !s.ok()) {
    return s;
  }
  if (auto s = gpu.CopyToHost(result.data(), out->data(), out->size()); !s.ok()) return s;
  return Decode(result, p.dtype);
}

std::string ShapeName(DType dtype, int64_t b, int64_t t, int64_t s, int64_t n, int64_t k, int64_t h,
                      bool causal) {
  return absl::StrFormat("%s_B%d_T%d_S%d_N%d_K%d_H%d%s", DTypeName(dtype), b, t, s, n, k, h,
                         causal ? "_causal" : "");
}

DeviceInfo FakeGpu(int cc_major, int cc_minor) {
  DeviceInfo d;
  d.kind = DeviceKind::kCuda;
  d.ordinal = 0;
  d.name = "test GPU";
  d.cc_major = cc_major;
  d.cc_minor = cc_minor;
  // Shared memory as on the GPUs the deploys use: H100/H200 (9.x), the L4 (8.9) and A100 (8.0).
  d.multiprocessors = cc_major >= 9 ? 132 : cc_minor == 0 ? 108 : 58;
  d.shared_memory_per_block = (cc_major >= 9 ? 227 : cc_minor == 0 ? 163 : 99) * 1024;
  d.shared_memory_per_sm = (cc_major >= 9 ? 228 : cc_minor == 0 ? 164 : 100) * 1024;
  return d;
}

void PrintTo(const Shape& s, std::ostream* os) {
  *os << "B=" << s.b << " T=" << s.t << " S=" << s.s << " N=" << s.n << " K=" << s.k
      << " H=" << s.h;
}

AttentionProblem ProblemOf(const Shape& s, DType dtype, bool causal) {
  AttentionProblem p;
  p.batch = s.b;
  p.q_len = s.t;
  p.kv_len = s.s;
  p.num_heads = s.n;
  p.num_kv_heads = s.k;
  p.head_dim = s.h;
  p.dtype = dtype;
  p.causal = causal;
  return p;
}

std::vector<Shape> AwkwardShapes(int64_t h80, std::initializer_list<Shape> extra) {
  std::vector<Shape> shapes(std::begin(kAwkwardShapes), std::end(kAwkwardShapes));
  for (Shape& s : shapes) {
    if (s.h == 80) s.h = h80;
  }
  shapes.insert(shapes.end(), extra);
  return shapes;
}

std::string DtypeShapeCausalName(const ::testing::TestParamInfo<DtypeShapeCausal>& info) {
  const auto& [dtype, s, causal] = info.param;
  return ShapeName(dtype, s.b, s.t, s.s, s.n, s.k, s.h, causal);
}

double UlpOf(double value, DType dtype) {
  const float f = static_cast<float>(value);
  if (dtype == DType::kFloat16) return Float16BitsToFloat(FloatToFloat16Bits(f) + 1) - value;
  return BFloat16BitsToFloat(FloatToBFloat16Bits(f) + 1) - value;
}

std::string Comparison::ToString() const {
  return absl::StrFormat(
      "max |out - ref| = %.3e, rel L2 = %.3e, worst element %d: out %.6g ref %.6g", max_abs_error,
      rel_l2, worst_index, worst_out, worst_ref);
}

Comparison Compare(const std::vector<double>& out, const std::vector<double>& ref, Tolerance tol) {
  Comparison c;
  if (out.size() != ref.size()) {
    c.within = false;
    return c;
  }
  double err2 = 0, ref2 = 0, worst_ratio = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    const double err = std::fabs(out[i] - ref[i]);
    const double allowed = tol.atol + tol.rtol * std::fabs(ref[i]);
    const double ratio = std::isnan(err) ? std::numeric_limits<double>::infinity() : err / allowed;
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      c.worst_index = static_cast<int64_t>(i);
      c.worst_out = out[i];
      c.worst_ref = ref[i];
    }
    if (!(err <= allowed)) c.within = false;  // NaN fails too
    if (!std::isnan(err)) c.max_abs_error = std::fmax(c.max_abs_error, err);
    err2 += err * err;
    ref2 += ref[i] * ref[i];
  }
  c.rel_l2 = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  if (!(c.rel_l2 <= tol.rel_l2)) c.within = false;
  return c;
}

Comparison ExpectWithin(const std::vector<double>& out, const std::vector<double>& ref,
                        Tolerance tol, const std::string& what) {
  const Comparison c = Compare(out, ref, tol);
  EXPECT_TRUE(c.within) << what << ": " << c.ToString();
  return c;
}

void ExpectErrorWithinRatio(const Comparison& c, const Comparison& peer, double ratio, double floor,
                            const std::string& what) {
  EXPECT_LE(c.rel_l2, ratio * peer.rel_l2 + floor)
      << what << ": " << c.ToString() << " vs " << peer.ToString();
}

bool IsHostBackend(const std::string& backend) {
  return backend == "cpu" || backend == "reference";
}

absl::StatusOr<Checked> RunVersusReference(const std::string& backend, const Inputs& in,
                                           const std::vector<double>& ref,
                                           const Comparison* naive) {
  auto out = IsHostBackend(backend) ? RunOnCpu(in, backend) : RunOnGpu(in, backend);
  if (!out.ok()) return out.status();
  const DType dtype = in.problem.dtype;
  const std::string what = backend + " " + in.problem.ToString();
  Checked checked{*std::move(out), {}};
  checked.comparison = ExpectWithin(checked.out, ref, ToleranceFor(dtype), what);
  if (naive != nullptr) {
    ExpectErrorWithinRatio(checked.comparison, *naive, kFastVsNaiveErrorRatio,
                           FastVsNaiveErrorFloor(dtype), what + " beside naive");
  }
  return checked;
}

absl::StatusOr<Comparison> NaiveComparison(const Inputs& in, const std::vector<double>& ref) {
  auto naive = RunOnGpu(in, "naive");
  if (!naive.ok()) return naive.status();
  return Compare(*naive, ref, ToleranceFor(in.problem.dtype));
}

void ExpectStridedKvMatchesReference(const Backend& backend, const AttentionProblem& p,
                                     uint64_t seed) {
  DeviceContext& gpu = *SharedGpuContext();
  Inputs in = RandomInputs(p, seed);
  const int64_t kh = p.num_kv_heads * p.head_dim;
  std::vector<uint16_t> kv(static_cast<size_t>(2 * KeyValueElements(p)));
  const auto* k16 = reinterpret_cast<const uint16_t*>(in.k.bytes.data());
  const auto* v16 = reinterpret_cast<const uint16_t*>(in.v.bytes.data());
  for (int64_t bs = 0; bs < p.batch * p.kv_len; ++bs)
    for (int64_t i = 0; i < kh; ++i) {
      kv[bs * 2 * kh + i] = k16[bs * kh + i];
      kv[bs * 2 * kh + kh + i] = v16[bs * kh + i];
    }
  const int64_t kv_bytes = static_cast<int64_t>(kv.size() * 2);
  const int64_t q_bytes = static_cast<int64_t>(in.q.bytes.size());
  auto kv_block = gpu.arena().Allocate(kv_bytes);
  auto q_block = gpu.arena().Allocate(q_bytes);
  auto out_block = gpu.arena().Allocate(q_bytes);
  ASSERT_TRUE(kv_block.ok() && q_block.ok() && out_block.ok());
  ASSERT_TRUE(gpu.CopyToDevice(kv_block->data(), kv.data(), kv_bytes).ok());
  ASSERT_TRUE(gpu.CopyToDevice(q_block->data(), in.q.bytes.data(), q_bytes).ok());
  auto strided = [&](char* data) {
    TensorView v;
    v.data = data;
    v.capacity_bytes = kv_bytes - (data - static_cast<char*>(kv_block->data()));
    v.dtype = p.dtype;
    v.memory = MemoryKind::kDevice;
    v.shape = {p.batch, p.kv_len, p.num_kv_heads, p.head_dim};
    v.strides = {p.kv_len * 2 * kh, 2 * kh, p.head_dim, 1};
    return v;
  };
  char* kv_base = static_cast<char*>(kv_block->data());
  AttentionTensors t{
      TensorView::Contiguous(q_block->data(), q_bytes, p.dtype, MemoryKind::kDevice, p.batch,
                             p.q_len, p.num_heads, p.head_dim),
      strided(kv_base), strided(kv_base + kh * 2),
      TensorView::Contiguous(out_block->data(), q_bytes, p.dtype, MemoryKind::kDevice, p.batch,
                             p.q_len, p.num_heads, p.head_dim)};
  ASSERT_TRUE(RunAttention(backend, p, t, gpu).ok());
  std::vector<uint8_t> out(static_cast<size_t>(q_bytes));
  ASSERT_TRUE(gpu.CopyToHost(out.data(), out_block->data(), q_bytes).ok());
  ExpectWithin(Decode(out, p.dtype), Reference(in), ToleranceFor(p.dtype),
               backend.name() + " " + p.ToString() + ", K and V interleaved");
}

}  // namespace attn::testing
