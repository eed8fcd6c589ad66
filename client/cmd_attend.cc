// attn-client attend: one Attend call. Inputs are generated on the server from --seed, or read
// from --q/--k/--v .npy files (whose shapes give the problem); --output writes the result as .npy;
// --check computes the same problem here with the float64 reference (attn/reference.h, what the
// `reference` backend runs) and prints the largest difference.
#include <chrono>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "attention/v1/attention.grpc.pb.h"
#include "attn/inputs.h"
#include "attn/kv_lens.h"
#include "attn/records.h"
#include "attn/reference.h"
#include "attn/tensor.h"
#include "client/commands.h"
#include "client/npy.h"
#include "client/report.h"
#include "proto/convert.h"

namespace attn::client {
namespace {

// The --check limit: the cpu backend takes about a second per GFLOP on two cores.
constexpr double kMaxCheckFlops = 4e9;

struct Inputs {
  AttentionProblem problem;
  std::string q, k, v;  // packed bytes of problem.dtype; empty when generated on the server
};

absl::StatusOr<Inputs> FromFiles(const ParsedArgs& args, DType dtype, bool causal) {
  Inputs in;
  NpyArray arrays[3];
  const char* names[3] = {"q", "k", "v"};
  for (int i = 0; i < 3; ++i) {
    auto a = ReadNpyFile(args.Get(names[i]));
    if (!a.ok()) return a.status();
    if (a->shape.size() != 4) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", names[i], " ", args.Get(names[i]), ": expected 4 dimensions (",
                       i == 0 ? "B, T, N, H" : "B, S, K, H", "); got ", a->shape.size()));
    }
    arrays[i] = std::move(*a);
  }
  const auto& q = arrays[0].shape;
  const auto& k = arrays[1].shape;
  const auto& v = arrays[2].shape;
  if (k != v)
    return absl::InvalidArgumentError("--k and --v: shapes differ; both are (B, S, K, H)");
  if (k[0] != q[0] || k[3] != q[3]) {
    return absl::InvalidArgumentError(
        "--q and --k: B and H must match (Q is (B, T, N, H), K is (B, S, K, H))");
  }
  in.problem = AttentionProblem::SelfAttention(q[0], q[1], q[2], q[3], dtype, causal, k[2]);
  in.problem.kv_len = k[1];
  bool converted = false;
  for (int i = 0; i < 3; ++i) {
    bool c = false;
    std::string bytes = ToDTypeBytes(arrays[i], dtype, &c);
    converted = converted || c;
    (i == 0 ? in.q : i == 1 ? in.k : in.v) = std::move(bytes);
  }
  if (converted) {
    std::fprintf(
        stderr, "attn-client: note: inputs converted from %s to %s (round to nearest even)\n",
        std::string(NpyTypeName(arrays[0].type)).c_str(), std::string(DTypeName(dtype)).c_str());
  }
  return in;
}

// The problem's inputs on the host, as the server generates them from `seed` (a pure function
// of the seed and the element index, the same on the host and the device).
absl::Status GenerateLocally(uint64_t seed, Inputs& in) {
  const AttentionProblem& p = in.problem;
  const int64_t counts[3] = {QueryElements(p), KeyValueElements(p), KeyValueElements(p)};
  std::string* buffers[3] = {&in.q, &in.k, &in.v};
  for (int i = 0; i < 3; ++i) {
    buffers[i]->assign(static_cast<size_t>(counts[i] * DTypeSize(p.dtype)), '\0');
    if (auto s = FillNormalHost(buffers[i]->data(), counts[i], p.dtype, InputSeed(seed, 0, i));
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// The reference output in float32: the float64 attention (the `reference` backend's) on the inputs.
absl::StatusOr<std::vector<float>> Reference(const Inputs& in, double scale) {
  AttentionProblem p = in.problem;
  if (scale > 0) p.scale = scale;
  auto scratch_bytes = ReferenceScratchBytes(p);
  if (!scratch_bytes.ok()) return scratch_bytes.status();
  std::vector<double> scratch(static_cast<size_t>(*scratch_bytes) / sizeof(double));
  // The output in the inputs' dtype would round the reference: widen it to float32.
  std::vector<float> out(static_cast<size_t>(QueryElements(p)));
  AttentionTensors t = PackedTensors(p, MemoryKind::kHost, const_cast<char*>(in.q.data()),
                                     const_cast<char*>(in.k.data()), const_cast<char*>(in.v.data()),
                                     nullptr, p.kv_lens.empty() ? nullptr : p.kv_lens.data());
  t.out = TensorView::Contiguous(out.data(), static_cast<int64_t>(out.size() * sizeof(float)),
                                 DType::kFloat32, MemoryKind::kHost, p.batch, p.q_len, p.num_heads,
                                 p.head_dim);
  AttentionProblem as_float = p;
  as_float.dtype = DType::kFloat32;
  if (auto s = ReferenceAttention(as_float, t, scratch.data()); !s.ok()) return s;
  return out;
}

}  // namespace

std::vector<OptionSpec> AttendSpecs() {
  return {
      {"batch", "B", "4", "batch size"},
      {"seq_len", "T", "128", "query positions"},
      {"kv_len", "S", "0", "key/value positions; 0: S = T"},
      {"heads", "N", "8", "query heads"},
      {"kv_heads", "K", "0", "key/value heads; 0: K = N"},
      {"head_dim", "H", "64", "head dimension"},
      {"dtype", "DTYPE", "bfloat16", "float32, bfloat16 or float16"},
      {"causal", "", "", "top-left causal mask (query t sees keys s <= t)"},
      {"kv_lens", "LENS", "", KvLensSpec::Help()},
      {"scale", "X", "0", "softmax scale; 0: 1/sqrt(H)"},
      {"backend", "NAME", "auto", "a backend from `attn-client info`, or auto"},
      {"seed", "N", "0", "the server generates the inputs from this seed (unless --q/--k/--v)"},
      {"q", "FILE", "", ".npy of Q, (B, T, N, H); with --k and --v, whose shapes give the problem"},
      {"k", "FILE", "", ".npy of K, (B, S, K, H)"},
      {"v", "FILE", "", ".npy of V, (B, S, K, H)"},
      {"output", "FILE", "", "write the output (B, T, N, H) as .npy (bfloat16 as ml_dtypes' <V2)"},
      {"check", "", "", "compare with the float64 reference computed here (up to 4 GFLOP)"},
  };
}

int RunAttend(const CommonOptions& common, const ParsedArgs& args) {
  auto dtype = ParseDType(args.Get("dtype"));
  if (!dtype.ok()) return Fail(kExitUsage, absl::StrCat("--dtype: ", dtype.status().message()));
  auto scale = args.GetDouble("scale");
  auto seed = args.GetInt("seed");
  if (!scale.ok() || !seed.ok() || *seed < 0)
    return Fail(kExitUsage, "--scale and --seed: expected numbers (seed >= 0)");
  const bool causal = args.GetBool("causal");
  const int files = args.Has("q") + args.Has("k") + args.Has("v");
  if (files != 0 && files != 3) return Fail(kExitUsage, "--q, --k and --v: give all three or none");
  Inputs in;
  if (files == 3) {
    auto read = FromFiles(args, *dtype, causal);
    if (!read.ok()) return Fail(kExitUsage, std::string(read.status().message()));
    in = std::move(*read);
  } else {
    int64_t dims[6];
    const char* names[6] = {"batch", "seq_len", "kv_len", "heads", "kv_heads", "head_dim"};
    for (int i = 0; i < 6; ++i) {
      auto v = args.GetInt(names[i]);
      if (!v.ok()) return Fail(kExitUsage, std::string(v.status().message()));
      dims[i] = *v;
    }
    in.problem = AttentionProblem::SelfAttention(dims[0], dims[1], dims[3], dims[5], *dtype, causal,
                                                 dims[4]);
    if (dims[2] > 0) in.problem.kv_len = dims[2];
  }
  auto kv_lens = KvLensSpec::Parse(args.Get("kv_lens"), "--kv-lens");
  if (!kv_lens.ok()) return Fail(kExitUsage, std::string(kv_lens.status().message()));
  auto lens = kv_lens->Lengths(in.problem.batch, in.problem.kv_len, static_cast<uint64_t>(*seed));
  if (!lens.ok()) return Fail(kExitUsage, std::string(lens.status().message()));
  in.problem.kv_lens = *std::move(lens);
  const bool check = args.GetBool("check");
  if (check) {
    if (auto s = ValidateProblem(in.problem); !s.ok())
      return Fail(kExitUsage, std::string(s.message()));
    const double flops = AttentionFlops(in.problem);
    if (flops > kMaxCheckFlops) {
      return Fail(kExitUsage, absl::StrFormat("--check: %.1f GFLOP is too large for the float64 "
                                              "reference here (up to %.0f)",
                                              flops / 1e9, kMaxCheckFlops / 1e9));
    }
    if (files == 0) {
      if (auto s = GenerateLocally(static_cast<uint64_t>(*seed), in); !s.ok()) {
        return Fail(kExitFailed, std::string(s.message()));
      }
    }
  }

  v1::AttendRequest req;
  v1::Shape* s = req.mutable_shape();
  s->set_batch(in.problem.batch);
  s->set_q_len(in.problem.q_len);
  s->set_kv_len(in.problem.kv_len);
  s->set_num_heads(in.problem.num_heads);
  s->set_num_kv_heads(in.problem.num_kv_heads);
  s->set_head_dim(in.problem.head_dim);
  req.set_dtype(DTypeToProto(*dtype));
  req.set_causal(causal);
  req.set_scale(*scale);
  req.set_backend(args.Get("backend"));
  req.set_client_id(common.client_id);
  req.mutable_kv_lens()->Add(in.problem.kv_lens.begin(), in.problem.kv_lens.end());
  if (!in.q.empty()) {
    req.mutable_tensors()->set_q(in.q);
    req.mutable_tensors()->set_k(in.k);
    req.mutable_tensors()->set_v(in.v);
  } else {
    req.mutable_generated()->set_seed(static_cast<uint64_t>(*seed));
  }
  const bool want_output = check || args.Has("output");
  req.set_omit_output(!want_output);

  auto stub = v1::AttentionService::NewStub(MakeChannel(common.target));
  const auto deadline =
      std::chrono::system_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(
                                             (common.timeout_s > 0 ? common.timeout_s : 60) * 1e3));
  const int64_t out_elems =
      in.problem.batch * in.problem.q_len * in.problem.num_heads * in.problem.head_dim;
  if (!in.q.empty()) {
    // Tensors from files go against the server's size limit here, before any byte is sent:
    // gRPC would otherwise upload them all and then refuse with its own message.
    grpc::ClientContext info_ctx;
    info_ctx.set_deadline(deadline);
    v1::ServerInfo info;
    const grpc::Status got = stub->GetServerInfo(&info_ctx, v1::GetServerInfoRequest(), &info);
    if (!got.ok()) return Fail(kExitFailed, DescribeRpcError(got, info_ctx, common.target.tls));
    const int64_t limit = info.limits().max_request_bytes();
    const int64_t sizes[2] = {static_cast<int64_t>(in.q.size() + in.k.size() + in.v.size()),
                              want_output ? out_elems * DTypeSize(*dtype) : 0};
    const char* what[2] = {"q + k + v", "the output"};
    for (int i = 0; i < 2; ++i) {
      if (limit > 0 && sizes[i] > limit) {
        return Fail(kExitUsage,
                    absl::StrFormat("attend: %s would be %.1f MiB, over the server's limit of "
                                    "%.0f MiB (its --max_request_mib); send smaller arrays (a "
                                    "smaller batch or sequence), or ask the host to raise "
                                    "--max_request_mib",
                                    what[i], sizes[i] / 1048576.0, limit / 1048576.0));
      }
    }
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline);
  v1::AttendResponse resp;
  const grpc::Status status = stub->Attend(&ctx, req, &resp);
  if (!status.ok()) {
    return Fail(status.error_code() == grpc::INVALID_ARGUMENT ? kExitUsage : kExitFailed,
                DescribeRpcError(status, ctx, common.target.tls));
  }
  const v1::Timings& t = resp.timings();
  const v1::Shape& q = req.shape();
  const std::string shape =
      absl::StrCat("(", q.batch(), ", ", q.q_len(), ", ", q.num_heads(), ", ", q.head_dim(), ")");
  Json doc = {{"backend", resp.backend()},
              {"device", resp.device()},
              {"hostname", resp.hostname()},
              {"replica", ctx.peer()},
              {"output_shape",
               {in.problem.batch, in.problem.q_len, in.problem.num_heads, in.problem.head_dim}},
              {"dtype", std::string(DTypeName(*dtype))},
              {"queue_ms", t.queue_seconds() * 1e3},
              {"device_ms", t.device_seconds() * 1e3},
              {"total_ms", t.total_seconds() * 1e3}};
  if (common.format != "json") {
    std::printf("backend:       %s on device %d of %s (%s)\n", resp.backend().c_str(),
                resp.device(), resp.hostname().c_str(), ctx.peer().c_str());
    std::printf("output:        %s %s\n", shape.c_str(), std::string(DTypeName(*dtype)).c_str());
    std::printf("timings (ms):  queue %.4f, device %.4f, total %.4f\n", t.queue_seconds() * 1e3,
                t.device_seconds() * 1e3, t.total_seconds() * 1e3);
  }
  if (want_output && static_cast<int64_t>(resp.output().size()) != out_elems * DTypeSize(*dtype)) {
    return Fail(kExitFailed,
                absl::StrCat("the server returned ", resp.output().size(),
                             " output bytes; expected ", out_elems * DTypeSize(*dtype)));
  }
  int code = kExitOk;
  if (check) {
    auto ref = Reference(in, *scale);
    if (!ref.ok()) return Fail(kExitFailed, absl::StrCat("--check: ", ref.status().message()));
    double max_diff = 0, num = 0, den = 0;
    bool close = true;
    // The codelab's closeness checks: atol 1e-3 in float32; rtol = atol = 1e-2 in 16-bit types.
    const double atol = *dtype == DType::kFloat32 ? 1e-3 : 1e-2;
    const double rtol = *dtype == DType::kFloat32 ? 0 : 1e-2;
    for (int64_t i = 0; i < out_elems; ++i) {
      const double got = LoadAsDouble(resp.output().data(), *dtype, i),
                   want = (*ref)[static_cast<size_t>(i)];
      const double d = std::fabs(got - want);
      max_diff = std::max(max_diff, std::isnan(d) ? INFINITY : d);
      close = close && d <= atol + rtol * std::fabs(want);
      num += d * d;
      den += want * want;
    }
    const double rel = den > 0 ? std::sqrt(num / den) : 0;
    doc["max_abs_diff"] = max_diff;
    doc["rel_l2_diff"] = rel;
    doc["close"] = close;
    if (common.format != "json") {
      std::printf(
          "check:         max |%s - float64 reference| %.2e, rel L2 %.2e; outputs close "
          "(atol=%g, rtol=%g): %s\n",
          resp.backend().c_str(), max_diff, rel, atol, rtol, close ? "True" : "False");
    }
    if (!close) code = kExitFailed;
  }
  if (common.format == "json") std::printf("%s\n", RecordsJson(doc).c_str());
  if (args.Has("output")) {
    NpyArray out = FromDTypeBytes(
        resp.output(), *dtype,
        {in.problem.batch, in.problem.q_len, in.problem.num_heads, in.problem.head_dim});
    if (auto w = WriteNpyFile(args.Get("output"), out); !w.ok())
      return Fail(kExitFailed, std::string(w.message()));
    if (common.format != "json") std::printf("wrote:         %s\n", args.Get("output").c_str());
  }
  return code;
}

}  // namespace attn::client
