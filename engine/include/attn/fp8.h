// FP8 attention: the E4M3 format, TransformerEngine's DelayedScaling recipe (host reference), the
// per-job recipe state the benchmark runner owns, and the entry point for inputs that are
// already E4M3. The `cudnn_fp8` backend (engine/src/cudnn_fp8/) runs cuDNN's sdpa_fp8 node.
//
// Names follow cudnn-frontend and TE: a tensor x is stored as e4m3(x * scale) and read back as
// e4m3 * descale (descale = 1 / scale); amax is max |x|. Per call there are five scaled tensors:
// Q, K, V (the inputs), S (softmax probabilities inside the kernel, quantised before P V) and O.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "attn/arena.h"
#include "attn/device.h"
#include "attn/fp8_scalars.h"
#include "attn/problem.h"

namespace attn {

// --- E4M3 (OCP "E4M3FN", CUDA's __nv_fp8_e4m3): 1 sign, 4 exponent (bias 7), 3 mantissa bits;
// no infinities, NaN is S.1111.111, largest finite 448, smallest normal 2^-6, subnormals 2^-9.
inline constexpr float kE4M3Max = 448.0f;
inline constexpr float kE5M2Max = 57344.0f;

// Round to nearest even, saturating to +-448 (CUDA's __NV_SATFINITE conversion; what cuDNN's
// FP8 kernels and our quantise kernel do); NaN gives 0x7f with the input's sign.
uint8_t FloatToE4M3(float value);
float E4M3ToFloat(uint8_t bits);

// --- The recipe: TransformerEngine's DelayedScaling, forward pass only.
enum class Fp8Format : uint8_t {
  kE4M3,    // E4M3 forward and backward
  kHybrid,  // E4M3 forward, E5M2 backward (TE's default; the codelab's Format.HYBRID)
  kE5M2,    // E5M2 everywhere: refused, cuDNN's FP8 SDPA forward computes in E4M3
};
enum class AmaxComputeAlgo : uint8_t {
  kMax,         // "max": the largest amax in the history window
  kMostRecent,  // "most_recent": the last call's amax
};

struct DelayedScaling {
  int margin = 0;  // scale = (fp8_max / amax) / 2^margin
  Fp8Format fp8_format = Fp8Format::kHybrid;
  int amax_history_len = 1024;  // calls remembered per tensor
  AmaxComputeAlgo amax_compute_algo = AmaxComputeAlgo::kMax;

  // "margin=0 fp8_format=HYBRID amax_history_len=1024 amax_compute_algo=max"
  std::string ToString() const;
};

// InvalidArgument naming the field: margin in [0, 64], amax_history_len in [1, 65536],
// fp8_format E4M3 or HYBRID (the forward pass runs in E4M3).
absl::Status ValidateDelayedScaling(const DelayedScaling& recipe);

// TE's scale update: (fp8_max / amax) / 2^margin, except that a zero or non-finite amax keeps
// `previous` (TE's _default_sf_compute: a tensor that was all zeros must not get an infinite
// scale).
float ComputeScale(float amax, float previous, float fp8_max, int margin);

const char* Fp8TensorName(int tensor);  // "q", "k", "v", "s", "o"

using Fp8Values = std::array<float, kNumFp8Tensors>;  // one value per tensor, Fp8Tensor order

// The host reference of the recipe for one module: amax histories of the five tensors (zeros at
// first, as TE's) and the scales derived from them (1.0 at first, as TE's). The device keeps the
// same state (Fp8RecipeState) and updates it with the same rules; tests hold the two together.
class AmaxHistory {
 public:
  explicit AmaxHistory(const DelayedScaling& recipe);

  // After a call that saw `amax`: records it as the newest entry of each history (dropping the
  // oldest once amax_history_len are held), reduces each history with amax_compute_algo and sets
  // each scale with ComputeScale(reduced, previous scale). TE's amax_and_scale_update.
  void Update(const Fp8Values& amax);

  const Fp8Values& scale() const { return scale_; }
  // The entry `age` calls back (0: the newest) of `tensor`'s history; 0 beyond what was recorded.
  float history(int tensor, int age) const;
  int64_t updates() const { return updates_; }
  const DelayedScaling& recipe() const { return recipe_; }

 private:
  DelayedScaling recipe_;
  std::array<std::vector<float>, kNumFp8Tensors> history_;  // ring buffers
  Fp8Values scale_;
  int64_t updates_ = 0;
};

// --- Device state (layout in attn/fp8_scalars.h).

// What a recipe state holds after its last call, read back from the device.
struct Fp8Snapshot {
  Fp8Values used_scale{};  // scales the last call quantised Q, K, V, S, O with
  Fp8Values seen_amax{};   // amaxes that call saw (S and O as cuDNN reported them)
  Fp8Values next_scale{};  // scales the next call will use
  int64_t updates = 0;     // calls recorded (CUDA-graph replays included)
};

// The FP8 recipe state of one benchmark case, TE's per-module state: amax histories of Q, K, V,
// S and O and the scales derived from them, in device memory on the case's context, updated by
// a kernel after every call so that no call waits for the host (CUDA-graph replays too). The
// runner owns one per case and passes it to every call through RunOptions::fp8_recipe; backends
// other than cudnn_fp8 ignore it. The first call has no history to derive scales from: it
// quantises with scales from the current amaxes (as a stateless call does, see the backend),
// records them, and later calls use the delayed scales. TE would start at scale 1.0, which for
// S (probabilities <= 1) leaves E4M3's 3 mantissa bits mostly on subnormals.
class Fp8RecipeState {
 public:
  explicit Fp8RecipeState(const DelayedScaling& recipe) : recipe_(recipe) {}
  Fp8RecipeState(const Fp8RecipeState&) = delete;
  Fp8RecipeState& operator=(const Fp8RecipeState&) = delete;

  const DelayedScaling& recipe() const { return recipe_; }
  // Calls the host has issued with this state (captured CUDA-graph calls count once).
  int64_t calls_issued() const { return calls_issued_; }
  bool used() const { return calls_issued_ > 0; }

  // Copies the state back from the device (synchronises the context's stream).
  // FailedPrecondition before the first call.
  absl::StatusOr<Fp8Snapshot> Read(DeviceContext& context) const;

  // For the backend: the device block (DeviceScalars + histories), allocated from `context`'s
  // arena on first use, and the count of issued calls.
  ArenaBlock& device_block() { return block_; }
  DeviceContext* device_context() const { return context_; }
  void set_device_context(DeviceContext* context) { context_ = context; }
  void CountCall() { ++calls_issued_; }
  static int64_t DeviceBytes(const DelayedScaling& recipe);

 private:
  DelayedScaling recipe_;
  ArenaBlock block_;
  DeviceContext* context_ = nullptr;
  int64_t calls_issued_ = 0;
};

// --- Inputs that are already E4M3.
// Packed BTNH E4M3 bytes in device memory with their descale factors (device floats: x = e4m3 *
// descale). q (B, T, N, H), k and v (B, S, K, H); out (B, T, N, H) E4M3, with the descale of the
// scale it was written with stored to *descale_o.
struct Fp8AttentionTensors {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const float* descale_q = nullptr;
  const float* descale_k = nullptr;
  const float* descale_v = nullptr;
  void* out = nullptr;
  float* descale_o = nullptr;
  // Optional device floats written with the call's amaxes of S and of O (before scaling).
  float* amax_s = nullptr;
  float* amax_o = nullptr;
};

// cuDNN's FP8 SDPA on E4M3 inputs, stateless: scale_s = 448 (probabilities are <= 1) and scale_o
// = 1 / descale_v (an output row is a convex combination of V's rows, so |O| <= max |V| <= 448 *
// descale_v). `problem.dtype` must be bfloat16 or float16 (the backend's rules apply; it names the
// precision the values came from and is otherwise unused). Workspace from `context`'s arena.
// FailedPrecondition where the cudnn_fp8 backend cannot run (without cuDNN in the build too).
absl::Status RunAttentionE4M3(const AttentionProblem& problem, const Fp8AttentionTensors& tensors,
                              DeviceContext& context);

// The cudnn_fp8 backend's call as separate steps, for the benchmark to time (TimeFp8Steps in
// attn/bench.h): the quantise kernel (Q, K, V to E4M3 with their amaxes, the first step of every
// call), cuDNN's sdpa_fp8 (the heuristic's plan), the dequantise of O into the caller's dtype and
// the DelayedScaling update (default history length).
enum class Fp8Step { kQuantize = 0, kAttention = 1, kDequantize = 2, kRecipeUpdate = 3 };
inline constexpr int kNumFp8Steps = 4;
// Called once per step, in order, with a function that enqueues that step alone on the context's
// stream (as often as the visitor likes); an error stops the visit and is returned.
using Fp8StepVisitor =
    std::function<absl::Status(Fp8Step step, const std::function<absl::Status()>& launch)>;
// Visits the steps on `problem`'s packed inputs at `q`, `k`, `v` with scales from their amaxes;
// returns cuDNN's name of the sdpa_fp8 plan, e.g. "eng2_k24=32". FailedPrecondition where
// cudnn_fp8 cannot run (no CUDA device, no cuDNN in the build).
absl::StatusOr<std::string> VisitFp8Steps(const AttentionProblem& problem, const void* q,
                                          const void* k, const void* v, DeviceContext& context,
                                          const Fp8StepVisitor& visit);

}  // namespace attn
