// `cudnn_fp8`: cuDNN's FP8 fused attention (sdpa_fp8 forward, inference) with TransformerEngine's
// delayed scaling. The only translation unit of the backend that includes cudnn_frontend.h.
//
// One call, bf16/fp16 in and out:
//   1. Q, K, V -> packed E4M3 in the workspace, laid out (B, heads, L, H) for cuDNN, one fused
//      kernel that also records their amaxes
//      (stateless calls and a recipe's first call first take the amaxes in a read-only pass and
//      derive the scales from them: LaunchAmax + LaunchCurrentScales);
//   2. sdpa_fp8 with descale_q/k/v/s, scale_s, scale_o, writing O in E4M3 and amax_s, amax_o
//      (on Hopper cuDNN writes FP8 O only: bf16 output from this node is Blackwell-only);
//   3. O (B, N, T, H) -> the caller's bf16/fp16 (B, T, N, H) view with descale_o;
//   4. with a recipe state, the DelayedScaling update on the device (LaunchRecipeUpdate).
// Large calls run steps 1-3 in batch chunks (ChunksFor), each chunk's quantise and dequantise on a
// second stream beside its neighbour's sdpa_fp8, so most of the memory-bound passes hide.
// All scalars live in device memory, so nothing waits for the host and CUDA-graph replays run
// the recipe as eager calls do. Graphs are cached per device by the problem, autotune and the
// E4M3 layout, in the cuDNN graph layer (cudnn/graph.h): cuDNN sees packed E4M3 tensors only,
// whatever the caller's strides (heads-major ones from the quantised path, (B, L, heads, H) ones
// from RunAttentionE4M3).
#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_format.h"
#include "attn/fp8.h"
#include "attn/overrides.h"
#include "attn/registry.h"
#include "backends.h"
#include "cuda/check.h"
#include "cudnn/graph.h"
#include "cudnn_fp8/fp8_kernels.h"

namespace attn {
namespace {

namespace fe = cudnn::fe;
using cudnn::Plan;
using fp8_internal::DeviceScalars;

// Tensor UIDs in the graph.
constexpr int64_t kQ = 1, kK = 2, kV = 3, kO = 4, kDescaleQ = 5, kDescaleK = 6, kDescaleV = 7,
                  kDescaleS = 8, kScaleS = 9, kScaleO = 10, kAmaxS = 11, kAmaxO = 12;

// Everything the graph depends on: the problem, autotune and whether the E4M3 tensors are
// (B, heads, L, H) rather than (B, L, heads, H).
cudnn::PlanKey KeyOf(const AttentionProblem& p, bool autotune, bool heads_major) {
  cudnn::PlanKey key = cudnn::KeyFields(p);
  key.push_back(autotune);
  key.push_back(heads_major);
  return key;
}

// Whether the quantised path lays its E4M3 copies out heads-major, (B, N, T, H): cuDNN's FP8
// kernel ran 3% faster on them than on (B, T, N, H) on the H200 (PERF.md, 2026-12-03), and the
// quantise kernel writes either at the same cost. Past 2^32 elements the kernels' 32-bit index
// math does not reach, and the copies stay (B, T, N, H).
bool QuantisedHeadsMajor(const AttentionProblem& p) {
  constexpr int64_t kLimit = int64_t{1} << 32;
  return QueryElements(p) < kLimit && KeyValueElements(p) < kLimit;
}

// Batch chunks a call runs in. With more than one, chunk c + 1's quantise and chunk c - 1's
// dequantise run on a second stream beside chunk c's sdpa_fp8, which leaves the memory system
// mostly idle. Measured on the H200 (B=4 N=16 H=128 causal, PERF.md 2026-12-03), call time with
// 1 / 2 / 4 chunks: T=8192 1.579 / 1.538 / 1.504 ms; T=4096 0.446 / 0.445 / 0.466; T=2048 0.168 /
// 0.175 / 0.198: a chunk pays when its sdpa_fp8 is long next to the fixed cost of one more launch,
// so the most chunks (of 4 and 2) that divide the batch and keep kMinChunkFlops each.
// SetFp8ChunksOverride (attn/overrides.h) forces a count where it divides the batch.
constexpr int kMaxChunks = 4;
constexpr double kMinChunkFlops = 2.5e11;
std::atomic<int> forced_chunks{0};  // 0: the rule
int ChunksFor(const AttentionProblem& p, bool heads_major) {
  if (!heads_major) return 1;
  const int forced = forced_chunks.load(std::memory_order_relaxed);
  if ((forced == 1 || forced == 2 || forced == 4) && p.batch % forced == 0) return forced;
  for (int n : {4, 2}) {
    if (p.batch % n == 0 && AttentionFlops(p) / n >= kMinChunkFlops) return n;
  }
  return 1;
}

AttentionProblem ChunkOf(const AttentionProblem& p, int chunks) {
  AttentionProblem c = p;
  c.batch = p.batch / chunks;
  return c;
}

int64_t Align(int64_t bytes) {
  return (bytes + Arena::kAlignment - 1) / Arena::kAlignment * Arena::kAlignment;
}

// The sdpa_fp8 graph of `p` on packed E4M3 tensors, BTNH (or BNTH when heads_major) as cuDNN's
// (B, heads, L, H) dims, with every FP8 scale a device scalar.
absl::StatusOr<Plan> Build(const AttentionProblem& p, bool autotune, bool heads_major,
                           cudnnHandle_t handle) {
  auto graph = std::make_shared<fe::graph::Graph>();
  graph->set_io_data_type(fe::DataType_t::FP8_E4M3)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto strides = [&](int64_t l, int64_t heads) -> std::vector<int64_t> {
    if (heads_major) return {heads * l * p.head_dim, l * p.head_dim, p.head_dim, 1};
    return {l * heads * p.head_dim, p.head_dim, heads * p.head_dim, 1};
  };
  auto view = [&](const char* name, int64_t uid, int64_t l, int64_t heads) {
    return graph->tensor(fe::graph::Tensor_attributes()
                             .set_name(name)
                             .set_uid(uid)
                             .set_dim({p.batch, heads, l, p.head_dim})
                             .set_stride(strides(l, heads)));
  };
  auto scalar = [&](const char* name, int64_t uid) {
    return graph->tensor(fe::graph::Tensor_attributes()
                             .set_name(name)
                             .set_uid(uid)
                             .set_dim({1, 1, 1, 1})
                             .set_stride({1, 1, 1, 1})
                             .set_data_type(fe::DataType_t::FLOAT));
  };
  auto q = view("Q", kQ, p.q_len, p.num_heads);
  auto k = view("K", kK, p.kv_len, p.num_kv_heads);
  auto v = view("V", kV, p.kv_len, p.num_kv_heads);
  auto options = fe::graph::SDPA_fp8_attributes()
                     .set_name("sdpa_fp8")
                     .set_generate_stats(false)
                     .set_attn_scale(static_cast<float>(p.EffectiveScale()));
  if (p.causal) {
    options.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
        .set_diagonal_band_right_bound(0);
  }
  auto [o, stats, amax_s, amax_o] =
      graph->sdpa_fp8(q, k, v, scalar("descale_q", kDescaleQ), scalar("descale_k", kDescaleK),
                      scalar("descale_v", kDescaleV), scalar("descale_s", kDescaleS),
                      scalar("scale_s", kScaleS), scalar("scale_o", kScaleO), options);
  (void)stats;
  o->set_output(true)
      .set_uid(kO)
      .set_data_type(fe::DataType_t::FP8_E4M3)
      .set_dim({p.batch, p.num_heads, p.q_len, p.head_dim})
      .set_stride(strides(p.q_len, p.num_heads));
  for (auto& [amax, uid] : {std::pair{amax_s, kAmaxS}, std::pair{amax_o, kAmaxO}}) {
    amax->set_output(true)
        .set_uid(uid)
        .set_dim({1, 1, 1, 1})
        .set_stride({1, 1, 1, 1})
        .set_data_type(fe::DataType_t::FLOAT);
  }
  return cudnn::BuildPlan(std::move(graph), handle, autotune, "cudnn_fp8", p);
}

// One device's cuDNN handle and FP8 plan cache (the graph layer's), and a second stream.
class Fp8State final : public cudnn::CudnnState {
 public:
  absl::Status Init(DeviceContext& context, const std::string& backend) {
    if (auto s = CudnnState::Init(context, backend); !s.ok()) return s;
    ATTN_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
    for (cudaEvent_t& e : events_) {
      ATTN_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    }
    return absl::OkStatus();
  }
  ~Fp8State() override {
    for (cudaEvent_t e : events_) {
      if (e != nullptr) cudaEventDestroy(e);
    }
    if (side_ != nullptr) cudaStreamDestroy(side_);
  }

  // The cached plan for `p`, building it on a miss. Requires mu held.
  absl::StatusOr<Plan*> PlanLocked(const AttentionProblem& p, bool autotune = false,
                                   bool heads_major = false) {
    return GetLocked(KeyOf(p, autotune, heads_major),
                     [&] { return Build(p, autotune, heads_major, handle()); });
  }

  // A chunked call's second stream and its fork/join events: the quantised chunk c + 1 is ready
  // (events_[c + 1]), chunk c's sdpa_fp8 is done (events_[kMaxChunks + c]), the side stream's
  // work is done (events_[2 * kMaxChunks]). Recorded anew each call, under mu.
  cudaStream_t side_ = nullptr;
  cudaEvent_t events_[2 * kMaxChunks + 1] = {};
};

// Byte offsets of one call's pieces in the backend's workspace.
struct Layout {
  int64_t q8, k8, v8, o8, scalars, chunk_amax, total;
};
Layout LayoutFor(const AttentionProblem& p, int64_t cudnn_bytes) {
  Layout l;
  l.q8 = Align(cudnn_bytes);
  l.k8 = l.q8 + Align(QueryElements(p));
  l.v8 = l.k8 + Align(KeyValueElements(p));
  l.o8 = l.v8 + Align(KeyValueElements(p));
  l.scalars = l.o8 + Align(QueryElements(p));
  l.chunk_amax = l.scalars + Align(sizeof(DeviceScalars));
  l.total = l.chunk_amax + Align(sizeof(fp8_internal::Scalar) * 2 * (kMaxChunks - 1));
  return l;
}

fp8::Operand OperandOf(const TensorView& t, uint8_t* dst, bool heads_major) {
  fp8::Operand op{};
  op.src = t.data;
  op.dst = dst;
  op.dst_heads_major = heads_major;
  for (int i = 0; i < 4; ++i) {
    op.shape[i] = t.shape[i];
    op.strides[i] = t.strides[i];
  }
  return op;
}

// The quantise and dequantise kernels move 16 bytes per thread.
absl::Status CheckVectorizable(const TensorView& t, const char* name) {
  const bool aligned = reinterpret_cast<uintptr_t>(t.data) % 16 == 0 && t.strides[0] % 8 == 0 &&
                       t.strides[1] % 8 == 0 && t.strides[2] % 8 == 0;
  if (aligned) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "cudnn_fp8: %s must start 16-byte aligned with strides that are multiples of 8 elements",
      name));
}

class CudnnFp8Backend final : public Backend {
 public:
  std::string name() const override { return "cudnn_fp8"; }
  bool takes_fp8_recipe() const override { return true; }
  std::string full_precision_peer() const override { return "cudnn"; }
  std::string description() const override {
    return absl::StrFormat(
        "cuDNN %d FP8 (E4M3) fused attention (sdpa_fp8 forward) via cudnn-frontend %d.%d, "
        "TransformerEngine delayed scaling",
        static_cast<int>(cudnnGetVersion()), CUDNN_FRONTEND_MAJOR_VERSION,
        CUDNN_FRONTEND_MINOR_VERSION);
  }

  // cuDNN's documented rules for FP8 SDPA forward (cudnn-frontend's support surface), as reasons.
  absl::Status CheckSupport(const AttentionProblem& p, const DeviceInfo& device) const override {
    const int version = static_cast<int>(cudnnGetVersion());
    const int64_t max_head_dim = device.cc_major == 9 ? 256 : 128;
    ATTN_UNSUPPORTED_IF(device.kind != DeviceKind::kCuda, "cudnn_fp8: needs a CUDA device");
    ATTN_UNSUPPORTED_IF(device.cc_major < 9,
                        "cudnn_fp8: no detected FP8 support; requires Hopper/Blackwell-class GPU "
                        "(compute capability >= 9.0); device has %d.%d",
                        device.cc_major, device.cc_minor);
    ATTN_UNSUPPORTED_IF(version < 90100,
                        "cudnn_fp8: cuDNN FP8 SDPA needs cuDNN >= 9.1.0; the loaded library is %d",
                        version);
    ATTN_UNSUPPORTED_IF(version == 91000,
                        "cudnn_fp8: cuDNN 9.10.0 has no FP8 SDPA forward; use another 9.x release");
    ATTN_UNSUPPORTED_IF(p.dtype != DType::kBFloat16 && p.dtype != DType::kFloat16,
                        "cudnn_fp8: takes bfloat16 or float16 input (quantised to E4M3 on the "
                        "device); got %s",
                        DTypeName(p.dtype));
    ATTN_UNSUPPORTED_IF(p.head_dim % 16 != 0,
                        "cudnn_fp8: head_dim must be a multiple of 16 for FP8; got %d", p.head_dim);
    // Measured on the H200 with cuDNN 9.19 (bench/gpu_fp8.sh, 2026-12-03): the heuristics
    // return no engine for a single query position (decode), with or without the mask.
    ATTN_UNSUPPORTED_IF(device.cc_major == 9 && p.q_len == 1,
                        "cudnn_fp8: cuDNN has no FP8 SDPA engine for q_len = 1 on compute "
                        "capability 9.x; use cudnn for decode");
    ATTN_UNSUPPORTED_IF(p.head_dim > max_head_dim,
                        "cudnn_fp8: head_dim must be <= %d in FP8 on compute capability %d.%d; "
                        "got %d",
                        max_head_dim, device.cc_major, device.cc_minor, p.head_dim);
    // Per-tensor scales: the amaxes of K and V would be taken over all S rows, the padding past
    // each length included, and so would the batch chunks' quantise passes.
    ATTN_UNSUPPORTED_IF(!p.kv_lens.empty(),
                        "cudnn_fp8: kv_lens not supported: its K and V scales are per tensor, "
                        "their amaxes taken over all S rows (padding included); use cudnn");
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> WorkspaceBytes(const AttentionProblem& p, DeviceContext& context,
                                         const RunOptions& options) const override {
    const bool heads_major = QuantisedHeadsMajor(p);
    auto plan =
        GetPlan(ChunkOf(p, ChunksFor(p, heads_major)), context, options.autotune, heads_major);
    if (!plan.ok()) return plan.status();
    return LayoutFor(p, (*plan)->workspace_bytes).total;
  }

  absl::Status Run(const RunArgs& args) const override {
    const AttentionProblem& p = args.problem;
    const AttentionTensors& t = args.tensors;
    if (t.out.memory != MemoryKind::kDevice) {
      return absl::InvalidArgumentError("cudnn_fp8: tensors must be in device memory");
    }
    const std::pair<const TensorView*, const char*> views[] = {
        {&t.q, "q"}, {&t.k, "k"}, {&t.v, "v"}, {&t.out, "out"}};
    for (const auto& [view, name] : views) {
      if (auto s = CheckVectorizable(*view, name); !s.ok()) return s;
    }
    auto state = State(args.context);
    if (!state.ok()) return state.status();
    Fp8State& st = **state;
    std::lock_guard<std::mutex> lock(st.mu);
    const bool heads_major = QuantisedHeadsMajor(p);
    const int chunks = ChunksFor(p, heads_major);
    auto plan = st.PlanLocked(ChunkOf(p, chunks), args.options.autotune, heads_major);
    if (!plan.ok()) return plan.status();
    const Layout l = LayoutFor(p, (*plan)->workspace_bytes);
    if (l.total > args.workspace_bytes) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "cudnn_fp8: needs %d workspace bytes, %d were given", l.total, args.workspace_bytes));
    }
    char* ws = static_cast<char*>(args.workspace);
    auto* q8 = reinterpret_cast<uint8_t*>(ws + l.q8);
    auto* k8 = reinterpret_cast<uint8_t*>(ws + l.k8);
    auto* v8 = reinterpret_cast<uint8_t*>(ws + l.v8);
    auto* o8 = reinterpret_cast<uint8_t*>(ws + l.o8);
    const CudaStream stream = args.context.stream();

    // Where the scalars live: the job's recipe state, or this call's workspace.
    Fp8RecipeState* recipe = args.options.fp8_recipe;
    DeviceScalars* s = nullptr;
    float* history = nullptr;
    bool current = true;
    int margin = 0;
    if (recipe != nullptr) {
      if (auto v = ValidateDelayedScaling(recipe->recipe()); !v.ok()) return v;
      if (recipe->calls_issued() == 0) {
        // A graph's replays would repeat the first call's zeroing and current-amax scales.
        cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
        ATTN_CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream, &capture));
        if (capture != cudaStreamCaptureStatusNone) {
          return absl::FailedPreconditionError(
              "cudnn_fp8: the first call with an FP8 recipe state must run eagerly, not in a "
              "CUDA-graph capture");
        }
      }
      if (recipe->device_block().data() == nullptr) {
        auto block = args.context.arena().Allocate(Fp8RecipeState::DeviceBytes(recipe->recipe()));
        if (!block.ok()) return block.status();
        ATTN_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(block->data(), 0, block->size(), stream));
        recipe->device_block() = *std::move(block);
        recipe->set_device_context(&args.context);
      } else if (recipe->device_context() != &args.context) {
        return absl::InvalidArgumentError(
            "cudnn_fp8: an FP8 recipe state belongs to the context of its first call");
      }
      s = static_cast<DeviceScalars*>(recipe->device_block().data());
      history = reinterpret_cast<float*>(s + 1);
      current = recipe->calls_issued() == 0;
      margin = recipe->recipe().margin;
    } else {
      s = reinterpret_cast<DeviceScalars*>(ws + l.scalars);
      ATTN_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(s, 0, sizeof(DeviceScalars), stream));
    }
    const fp8::HalfType type =
        p.dtype == DType::kBFloat16 ? fp8::HalfType::kBFloat16 : fp8::HalfType::kFloat16;
    const fp8::Operand ops[3] = {OperandOf(t.q, q8, heads_major), OperandOf(t.k, k8, heads_major),
                                 OperandOf(t.v, v8, heads_major)};
    if (current) {
      ATTN_CUDA_RETURN_IF_ERROR(fp8::LaunchAmax(type, ops, s, stream));
      ATTN_CUDA_RETURN_IF_ERROR(fp8::LaunchCurrentScales(s, margin, nullptr, stream));
    }
    // Chunk c: batches [c * nb, (c + 1) * nb). Its E4M3 copies and O start c * nb batches into the
    // workspace buffers (batch is the outer dimension of either layout).
    const int64_t nb = p.batch / chunks;
    const int64_t q_batch = QueryElements(p) / p.batch, kv_batch = KeyValueElements(p) / p.batch;
    auto chunk_operands = [&](int c, fp8::Operand(&out)[3]) {
      for (int i = 0; i < 3; ++i) {
        const fp8::Operand& whole = ops[i];
        out[i] = whole;
        out[i].src =
            static_cast<const char*>(whole.src) + c * nb * whole.strides[0] * DTypeSize(p.dtype);
        out[i].dst = whole.dst + c * nb * (i == 0 ? q_batch : kv_batch);
        out[i].shape[0] = nb;
      }
    };
    auto* chunk_amax = reinterpret_cast<fp8_internal::Scalar*>(ws + l.chunk_amax);
    auto execute = [&](int c) {
      // Chunk 0 writes the amaxes of S and O to s's slots, the others to theirs in the workspace
      // (each execute overwrites its slots); the recipe update takes the max of all of them.
      float* amax_s = c == 0 ? nullptr : &chunk_amax[2 * (c - 1)].value;
      float* amax_o = c == 0 ? nullptr : &chunk_amax[2 * (c - 1) + 1].value;
      return Execute(st, **plan, q8 + c * nb * q_batch, k8 + c * nb * kv_batch,
                     v8 + c * nb * kv_batch, o8 + c * nb * q_batch, &s->descale[kFp8Q].value,
                     &s->descale[kFp8K].value, &s->descale[kFp8V].value, s, args.workspace, amax_s,
                     amax_o);
    };
    int64_t out_shape[4], out_strides[4];
    for (int i = 0; i < 4; ++i) {
      out_shape[i] = t.out.shape[i];
      out_strides[i] = t.out.strides[i];
    }
    out_shape[0] = nb;
    auto dequantize = [&](int c, cudaStream_t on) {
      void* out = static_cast<char*>(t.out.data) + c * nb * t.out.strides[0] * DTypeSize(p.dtype);
      return fp8::LaunchDequantize(type, o8 + c * nb * q_batch, heads_major, out, out_shape,
                                   out_strides, s, on);
    };

    // main: Q0 | E0 | E1 ... | E(n-1) | D(n-1) | join
    // side:      Q1 | D0 Q2 | D1 Q3 ...          (each beside the main stream's sdpa_fp8)
    fp8::Operand chunk_ops[3];
    chunk_operands(0, chunk_ops);
    ATTN_CUDA_RETURN_IF_ERROR(fp8::LaunchQuantize(type, chunk_ops, s, stream));
    if (chunks > 1) {
      ATTN_CUDA_RETURN_IF_ERROR(cudaEventRecord(st.events_[0], stream));
      ATTN_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(st.side_, st.events_[0], 0));
      chunk_operands(1, chunk_ops);
      ATTN_CUDA_RETURN_IF_ERROR(fp8::LaunchQuantize(type, chunk_ops, s, st.side_));
      ATTN_CUDA_RETURN_IF_ERROR(cudaEventRecord(st.events_[1], st.side_));
    }
    if (args.options.autotune && !(*plan)->tuned) {
      // Times every built plan on chunk 0's quantised buffers (its O and amax slots are
      // overwritten by the real run below) and keeps the fastest for this key.
      auto pack = Pack(q8, k8, v8, o8, &s->descale[kFp8Q].value, &s->descale[kFp8K].value,
                       &s->descale[kFp8V].value, s);
      if (auto a = st.AutotuneLocked(**plan, pack, args.workspace); !a.ok()) return a;
    }
    for (int c = 0; c < chunks; ++c) {
      if (c > 0) ATTN_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream, st.events_[c], 0));
      if (auto e = execute(c); !e.ok()) return e;
      if (c + 1 == chunks) break;
      ATTN_CUDA_RETURN_IF_ERROR(cudaEventRecord(st.events_[kMaxChunks + c], stream));
      ATTN_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(st.side_, st.events_[kMaxChunks + c], 0));
      ATTN_CUDA_RETURN_IF_ERROR(dequantize(c, st.side_));
      if (c + 2 < chunks) {
        chunk_operands(c + 2, chunk_ops);
        ATTN_CUDA_RETURN_IF_ERROR(fp8::LaunchQuantize(type, chunk_ops, s, st.side_));
        ATTN_CUDA_RETURN_IF_ERROR(cudaEventRecord(st.events_[c + 2], st.side_));
      }
    }
    ATTN_CUDA_RETURN_IF_ERROR(dequantize(chunks - 1, stream));
    if (chunks > 1) {
      ATTN_CUDA_RETURN_IF_ERROR(cudaEventRecord(st.events_[2 * kMaxChunks], st.side_));
      ATTN_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream, st.events_[2 * kMaxChunks], 0));
    }
    if (recipe != nullptr) {
      ATTN_CUDA_RETURN_IF_ERROR(fp8::LaunchRecipeUpdate(
          s, history, recipe->recipe().amax_history_len,
          recipe->recipe().amax_compute_algo == AmaxComputeAlgo::kMostRecent, margin, chunk_amax,
          chunks - 1, stream));
      recipe->CountCall();
    }
    return absl::OkStatus();
  }

  std::optional<PlanCacheStats> plan_cache_stats(DeviceContext& context) const override {
    auto state = State(context);
    if (!state.ok()) return std::nullopt;
    return (*state)->Stats();
  }

  // sdpa_fp8 on packed E4M3 q, k, v into o, with S and O scaled by s's slots and the amaxes of
  // S and O written to amax_s, amax_o (default: s's slots). Requires st.mu held.
  static std::unordered_map<int64_t, void*> Pack(const void* q, const void* k, const void* v,
                                                 void* o, const float* descale_q,
                                                 const float* descale_k, const float* descale_v,
                                                 DeviceScalars* s, float* amax_s = nullptr,
                                                 float* amax_o = nullptr) {
    return {{kQ, const_cast<void*>(q)},
            {kK, const_cast<void*>(k)},
            {kV, const_cast<void*>(v)},
            {kO, o},
            {kDescaleQ, const_cast<float*>(descale_q)},
            {kDescaleK, const_cast<float*>(descale_k)},
            {kDescaleV, const_cast<float*>(descale_v)},
            {kDescaleS, &s->descale[kFp8S].value},
            {kScaleS, &s->scale[kFp8S].value},
            {kScaleO, &s->scale[kFp8O].value},
            {kAmaxS, amax_s != nullptr ? amax_s : &s->amax[kFp8S].value},
            {kAmaxO, amax_o != nullptr ? amax_o : &s->amax[kFp8O].value}};
  }

  static absl::Status Execute(Fp8State& st, Plan& plan, const void* q, const void* k, const void* v,
                              void* o, const float* descale_q, const float* descale_k,
                              const float* descale_v, DeviceScalars* s, void* workspace,
                              float* amax_s = nullptr, float* amax_o = nullptr) {
    auto pack = Pack(q, k, v, o, descale_q, descale_k, descale_v, s, amax_s, amax_o);
    ATTN_CUDNN_RETURN_IF_ERROR(plan.graph->execute(st.handle(), pack, workspace));
    return absl::OkStatus();
  }

  absl::StatusOr<Fp8State*> State(DeviceContext& context) const {
    return cudnn::StateOf<Fp8State>(this, context);
  }

  absl::StatusOr<Plan*> GetPlan(const AttentionProblem& p, DeviceContext& context, bool autotune,
                                bool heads_major) const {
    auto state = State(context);
    if (!state.ok()) return state.status();
    std::lock_guard<std::mutex> lock((*state)->mu);
    return (*state)->PlanLocked(p, autotune, heads_major);
  }
};

}  // namespace

std::unique_ptr<Backend> MakeCudnnFp8Backend() { return std::make_unique<CudnnFp8Backend>(); }

void SetFp8ChunksOverride(std::optional<int> chunks) {
  forced_chunks.store(chunks.value_or(0), std::memory_order_relaxed);
}

absl::Status RunAttentionE4M3(const AttentionProblem& p, const Fp8AttentionTensors& t,
                              DeviceContext& context) {
  if (auto s = ValidateProblem(p); !s.ok()) return s;
  // The registered instance, so the E4M3 path shares the backend's plan cache and handle.
  const auto& backend =
      static_cast<const CudnnFp8Backend&>(*BackendRegistry::Default().Find("cudnn_fp8"));
  if (auto s = backend.CheckSupport(p, context.info()); !s.ok()) return s;
  for (const void* ptr : {t.q, t.k, t.v, static_cast<const void*>(t.out)}) {
    if (ptr == nullptr || reinterpret_cast<uintptr_t>(ptr) % 16 != 0) {
      return absl::InvalidArgumentError(
          "cudnn_fp8: E4M3 q, k, v and out must be non-null and 16-byte aligned");
    }
  }
  if (t.descale_q == nullptr || t.descale_k == nullptr || t.descale_v == nullptr ||
      t.descale_o == nullptr) {
    return absl::InvalidArgumentError(
        "cudnn_fp8: descale_q, descale_k, descale_v and descale_o are required");
  }
  auto state = backend.State(context);
  if (!state.ok()) return state.status();
  Fp8State& st = **state;
  std::lock_guard<std::mutex> lock(st.mu);
  auto plan = st.PlanLocked(p);
  if (!plan.ok()) return plan.status();
  const int64_t cudnn_bytes = Align((*plan)->workspace_bytes);
  auto block = context.arena().Allocate(cudnn_bytes + Align(sizeof(DeviceScalars)));
  if (!block.ok()) return block.status();
  char* ws = static_cast<char*>(block->data());
  auto* s = reinterpret_cast<DeviceScalars*>(ws + cudnn_bytes);
  const CudaStream stream = context.stream();
  ATTN_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(s, 0, sizeof(DeviceScalars), stream));
  ATTN_CUDA_RETURN_IF_ERROR(fp8::LaunchCurrentScales(s, 0, t.descale_v, stream));
  if (auto e = CudnnFp8Backend::Execute(st, **plan, t.q, t.k, t.v, t.out, t.descale_q, t.descale_k,
                                        t.descale_v, s, ws);
      !e.ok()) {
    return e;
  }
  ATTN_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(t.descale_o, &s->descale[kFp8O].value, 4, cudaMemcpyDeviceToDevice, stream));
  if (t.amax_s != nullptr) {
    ATTN_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(t.amax_s, &s->amax[kFp8S].value, 4, cudaMemcpyDeviceToDevice, stream));
  }
  if (t.amax_o != nullptr) {
    ATTN_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(t.amax_o, &s->amax[kFp8O].value, 4, cudaMemcpyDeviceToDevice, stream));
  }
  // The block goes back to the arena while the work may be queued: safe, as in RunAttention
  // (everything that can reuse it is ordered after it on the context's one stream).
  return absl::OkStatus();
}

absl::StatusOr<std::string> VisitFp8Steps(const AttentionProblem& p, const void* q, const void* k,
                                          const void* v, DeviceContext& context,
                                          const Fp8StepVisitor& visit) {
  if (context.info().kind != DeviceKind::kCuda) {
    return absl::FailedPreconditionError("cudnn_fp8: step timing needs a CUDA device");
  }
  if (p.dtype != DType::kBFloat16 && p.dtype != DType::kFloat16) {
    return absl::InvalidArgumentError("cudnn_fp8: step timing takes bfloat16 or float16 inputs");
  }
  const auto& backend =
      static_cast<const CudnnFp8Backend&>(*BackendRegistry::Default().Find("cudnn_fp8"));
  if (auto s = backend.CheckSupport(p, context.info()); !s.ok()) return s;
  auto state = backend.State(context);
  if (!state.ok()) return state.status();
  Fp8State& st = **state;
  std::lock_guard<std::mutex> lock(st.mu);
  const bool heads_major = QuantisedHeadsMajor(p);
  auto plan = st.PlanLocked(p, /*autotune=*/false, heads_major);
  if (!plan.ok()) return plan.status();

  // The call's workspace, then an output in the caller's dtype and the recipe's histories.
  const DelayedScaling recipe;
  const Layout l = LayoutFor(p, (*plan)->workspace_bytes);
  const int64_t out_bytes = Align(QueryElements(p) * DTypeSize(p.dtype));
  auto block = context.arena().Allocate(
      l.total + out_bytes + Align(int64_t{kNumFp8Tensors} * recipe.amax_history_len * 4));
  if (!block.ok()) return block.status();
  auto* ws = static_cast<char*>(block->data());
  auto* s = reinterpret_cast<DeviceScalars*>(ws + l.scalars);
  void* out = ws + l.total;
  auto* history = reinterpret_cast<float*>(ws + l.total + out_bytes);
  auto* q8 = reinterpret_cast<uint8_t*>(ws + l.q8);
  auto* k8 = reinterpret_cast<uint8_t*>(ws + l.k8);
  auto* v8 = reinterpret_cast<uint8_t*>(ws + l.v8);
  auto* o8 = reinterpret_cast<uint8_t*>(ws + l.o8);
  const CudaStream stream = context.stream();
  const AttentionTensors t = PackedTensors(p, MemoryKind::kDevice, const_cast<void*>(q),
                                           const_cast<void*>(k), const_cast<void*>(v), out);
  const fp8::Operand ops[3] = {OperandOf(t.q, q8, heads_major), OperandOf(t.k, k8, heads_major),
                               OperandOf(t.v, v8, heads_major)};
  const fp8::HalfType type =
      p.dtype == DType::kBFloat16 ? fp8::HalfType::kBFloat16 : fp8::HalfType::kFloat16;
  int64_t shape[4], strides[4];
  for (int i = 0; i < 4; ++i) {
    shape[i] = t.out.shape[i];
    strides[i] = t.out.strides[i];
  }
  // Real scales first (from the inputs' amaxes), so every timed step sees real values.
  ATTN_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(s, 0, sizeof(DeviceScalars), stream));
  ATTN_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(history, 0, int64_t{kNumFp8Tensors} * recipe.amax_history_len * 4, stream));
  ATTN_CUDA_RETURN_IF_ERROR(fp8::LaunchAmax(type, ops, s, stream));
  ATTN_CUDA_RETURN_IF_ERROR(fp8::LaunchCurrentScales(s, 0, nullptr, stream));

  const std::function<absl::Status()> steps[4] = {
      [&]() -> absl::Status {
        ATTN_CUDA_RETURN_IF_ERROR(fp8::LaunchQuantize(type, ops, s, stream));
        return absl::OkStatus();
      },
      [&] {
        return CudnnFp8Backend::Execute(st, **plan, q8, k8, v8, o8, &s->descale[kFp8Q].value,
                                        &s->descale[kFp8K].value, &s->descale[kFp8V].value, s, ws);
      },
      [&]() -> absl::Status {
        ATTN_CUDA_RETURN_IF_ERROR(
            fp8::LaunchDequantize(type, o8, heads_major, out, shape, strides, s, stream));
        return absl::OkStatus();
      },
      [&]() -> absl::Status {
        ATTN_CUDA_RETURN_IF_ERROR(
            fp8::LaunchRecipeUpdate(s, history, recipe.amax_history_len,
                                    recipe.amax_compute_algo == AmaxComputeAlgo::kMostRecent,
                                    recipe.margin, nullptr, 0, stream));
        return absl::OkStatus();
      }};
  for (Fp8Step step :
       {Fp8Step::kQuantize, Fp8Step::kAttention, Fp8Step::kDequantize, Fp8Step::kRecipeUpdate}) {
    if (auto e = visit(step, steps[static_cast<int>(step)]); !e.ok()) return e;
  }
  // The arena block goes back while the steps may be queued: safe, as in RunAttention.
  std::string plan_name;
  (void)(*plan)->graph->get_plan_name(plan_name);
  return plan_name;
}

}  // namespace attn
