// attn-server end to end on the cpu backend: a real server on a picked loopback port.
#include "server/server.h"

#include <arpa/inet.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "attention/v1/attention.grpc.pb.h"
#include "attn/inputs.h"
#include "attn/registry.h"
#include "bench/loopback.h"
#include "engine/test_util.h"
#include "gtest/gtest.h"
#include "inputs/normal.h"
#include "proto/convert.h"
#include "server/server_helpers.h"
#include "server_process.h"

namespace attn::server {
namespace {
namespace v1 = attention::v1;
using ::attn::testing::Compare;
using ::attn::testing::Connect;
using ::attn::testing::CpuOptions;
using ::attn::testing::Decode;
using ::attn::testing::JobStatus;
using ::attn::testing::MakeOperand;
using ::attn::testing::MakeShape;
using ::attn::testing::ToleranceFor;

// grpc.health.v1.Health/Check as a kubelet gRPC probe makes it, without generated stubs:
// HealthCheckRequest is field 1 (service, a string), HealthCheckResponse field 1 (status).
// Returns the status (1 SERVING, 2 NOT_SERVING), or minus the gRPC code when the call fails.
int HealthStatus(int port, const std::string& service) {
  grpc::GenericStub stub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  std::string request_bytes;
  if (!service.empty()) {
    request_bytes.push_back(0x0a);
    request_bytes.push_back(static_cast<char>(service.size()));
    request_bytes += service;
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::ByteBuffer response;
  const grpc::Status status = ::attn::loopback::RawUnaryCall(
      stub, ctx, "/grpc.health.v1.Health/Check", request_bytes, &response);
  if (!status.ok()) return -static_cast<int>(status.error_code());
  std::vector<grpc::Slice> slices;
  (void)response.Dump(&slices);
  std::string bytes;
  for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return bytes.size() == 2 && bytes[0] == 0x08 ? bytes[1] : 0;  // UNKNOWN (0) is an empty message
}

constexpr int kServing = 1;
constexpr int kNotServing = 2;

// A case that takes a while (about 20-60 ms per call of the float64 reference on two cores).
v1::BenchmarkCase SlowCase() {
  v1::BenchmarkCase c;
  c.set_section("slow");
  *c.mutable_shape() = MakeShape(2, 256, 8, 64);
  c.set_dtype(v1::FLOAT32);
  c.set_backend("reference");
  return c;
}

v1::RunBenchmarkRequest SlowJob(int cases, int repeats) {
  v1::RunBenchmarkRequest r;
  for (int i = 0; i < cases; ++i) *r.mutable_cases()->add_cases() = SlowCase();
  r.mutable_options()->set_warmup(0);
  r.mutable_options()->set_repeats(repeats);
  return r;
}

class ServerTest : public ::testing::Test {
 protected:
  void StartServer(ServerOptions options = CpuOptions()) {
    auto s = Server::Start(options);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
    stub_ = Connect(server_->port());
  }
  void SetUp() override { StartServer(); }

  std::unique_ptr<Server> server_;
  std::unique_ptr<v1::AttentionService::Stub> stub_;
};

TEST_F(ServerTest, ServerInfoDescribesTheCpuDeviceBackendsAndLimits) {
  grpc::ClientContext ctx;
  v1::ServerInfo info;
  ASSERT_TRUE(stub_->GetServerInfo(&ctx, {}, &info).ok());
  ASSERT_EQ(info.devices_size(), 1);
  EXPECT_EQ(info.devices(0).kind(), "cpu");
  EXPECT_EQ(info.limits().max_request_bytes(), 8 << 20);
  EXPECT_EQ(info.limits().queue_depth(), 64);
  bool cpu_ok = false;
  for (const auto& b : info.backends()) {
    if (b.backend() == "cpu") cpu_ok = cpu_ok || b.supported();
    if (!b.supported()) {
      EXPECT_FALSE(b.reason().empty()) << b.backend();
    }
  }
  EXPECT_TRUE(cpu_ok);
  EXPECT_FALSE(info.hostname().empty());
}

TEST_F(ServerTest, HealthIsServingForLivenessAndReadiness) {
  EXPECT_TRUE(server_->serving());
  EXPECT_EQ(HealthStatus(server_->port(), kLivenessService), kServing);
  EXPECT_EQ(HealthStatus(server_->port(), kReadinessService), kServing);
  EXPECT_EQ(HealthStatus(server_->port(), "no.such.Service"), -grpc::NOT_FOUND);
}

// A GPU node whose driver is older than the CUDA runtime (played by gpu_check): the process
// stays up and says why; the start-up and liveness probes (service "") see SERVING, so the pod is
// not restarted in a loop; readiness sees NOT_SERVING, so it never takes traffic.
TEST(ServerHealth, AnUnusableGpuKeepsLivenessServingAndReadinessNotServing) {
  const std::string reason =
      "the NVIDIA driver supports CUDA 12.2, but attn was built with the CUDA 13.0 runtime: "
      "install a driver for CUDA 13.0 or newer (R580+ for CUDA 13)";
  ServerOptions o = CpuOptions();
  o.devices = "";
  o.gpu_check = [&] { return absl::FailedPreconditionError(reason); };
  auto started = Server::Start(o);
  ASSERT_TRUE(started.ok()) << started.status();
  Server& server = **started;
  EXPECT_FALSE(server.serving());
  EXPECT_EQ(HealthStatus(server.port(), kLivenessService), kServing);
  EXPECT_EQ(HealthStatus(server.port(), kReadinessService), kNotServing);

  auto stub = Connect(server.port());
  v1::AttendRequest req;
  *req.mutable_shape() = MakeShape(1, 16, 2, 16);
  req.set_dtype(v1::FLOAT32);
  req.mutable_generated()->set_seed(1);
  grpc::ClientContext actx;
  v1::AttendResponse resp;
  const grpc::Status s = stub->Attend(&actx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::UNAVAILABLE);
  EXPECT_EQ(s.error_message(), "not serving: " + reason);
  grpc::ClientContext ictx;
  v1::ServerInfo info;
  ASSERT_TRUE(stub->GetServerInfo(&ictx, {}, &info).ok());
  EXPECT_EQ(info.note(), reason);
  EXPECT_EQ(info.devices_size(), 0);
  const std::string metrics = server.metrics().Render();
  EXPECT_NE(metrics.find("\nattn_serving 0\n"), std::string::npos) << metrics;
}

// An Attend of `in`: its problem (shape, dtype, mask, kv_lens) and its exact bytes.
v1::AttendRequest TensorsRequest(const ::attn::testing::Inputs& in) {
  const AttentionProblem& p = in.problem;
  v1::AttendRequest req;
  ShapeToProto(p, req.mutable_shape());
  req.set_dtype(DTypeToProto(p.dtype));
  req.set_causal(p.causal);
  req.mutable_kv_lens()->Add(p.kv_lens.begin(), p.kv_lens.end());
  auto* t = req.mutable_tensors();
  t->set_q(std::string(in.q.bytes.begin(), in.q.bytes.end()));
  t->set_k(std::string(in.k.bytes.begin(), in.k.bytes.end()));
  t->set_v(std::string(in.v.bytes.begin(), in.v.bytes.end()));
  return req;
}

// The output is the float64 reference of the same inputs; kv_lens travel with the request,
// reach the device with Q, K and V, and mask each batch element's keys (causal on top).
TEST_F(ServerTest, AttendOutputEqualsTheFloat64Reference) {
  auto ragged = AttentionProblem::SelfAttention(3, 5, 4, 32, DType::kFloat16, true, 2);
  ragged.kv_len = 40;
  ragged.kv_lens = {1, 40, 17};
  for (const AttentionProblem& p :
       {AttentionProblem::SelfAttention(2, 33, 4, 32, DType::kBFloat16, true, 2), ragged}) {
    const auto in = ::attn::testing::RandomInputs(p, 7);
    grpc::ClientContext ctx;
    v1::AttendResponse resp;
    const grpc::Status s = stub_->Attend(&ctx, TensorsRequest(in), &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.backend(), "cpu");
    std::vector<uint8_t> bytes(resp.output().begin(), resp.output().end());
    const std::vector<double> out = Decode(bytes, p.dtype);
    const auto cmp = Compare(out, ::attn::testing::Reference(in), ToleranceFor(p.dtype));
    EXPECT_TRUE(cmp.within) << p.ToString() << ": " << cmp.ToString();
    EXPECT_GT(resp.timings().device_seconds(), 0);
    EXPECT_GE(resp.timings().total_seconds(), resp.timings().device_seconds());
    if (p.kv_lens.empty()) continue;
    // The lengths mattered: without them the output differs.
    auto dense = in;
    dense.problem.kv_lens.clear();
    EXPECT_FALSE(Compare(out, ::attn::testing::Reference(dense), ToleranceFor(p.dtype)).within);
  }
}

// A benchmark case carries its lengths to the runner and back (CaseStarted, CaseResult), is
// checked against the reference with them, and reports its effective K/V bandwidth.
TEST_F(ServerTest, BenchmarkCasesCarryKvLens) {
  v1::RunBenchmarkRequest req;
  auto* c = req.mutable_cases()->add_cases();
  c->set_section("decode");
  *c->mutable_shape() = MakeShape(4, 1, 8, 64, 2);
  c->mutable_shape()->set_kv_len(300);
  c->set_dtype(v1::BFLOAT16);
  c->set_backend("cpu");
  for (int32_t len : {1, 300, 77, 150}) c->add_kv_lens(len);
  req.mutable_options()->set_repeats(3);
  req.mutable_options()->set_check_numerics(true);
  grpc::ClientContext ctx;
  auto reader = stub_->RunBenchmark(&ctx, req);
  std::vector<v1::RunBenchmarkEvent> events;
  for (v1::RunBenchmarkEvent e; reader->Read(&e);) events.push_back(e);
  ASSERT_TRUE(reader->Finish().ok());
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[1].case_started().case_().kv_lens_size(), 4);
  const v1::CaseResult& r = events[2].result();
  ASSERT_EQ(r.status(), grpc::OK) << r.message();
  EXPECT_EQ(std::vector<int32_t>(r.case_().kv_lens().begin(), r.case_().kv_lens().end()),
            (std::vector<int32_t>{1, 300, 77, 150}));
  EXPECT_LE(r.max_abs_error(), ToleranceFor(DType::kBFloat16).atol * 2) << r.numerics();
  // K and V of 528 rows, 2 heads of 64 bf16 each.
  const double kv_bytes = 2.0 * 528 * 2 * 64 * 2;
  EXPECT_NEAR(r.kv_gbps(), kv_bytes / (r.stats().median_ms() * 1e6), r.kv_gbps() * 1e-9);
  // A bad length is the case's field and the rule.
  c->set_kv_lens(2, 301);
  const grpc::Status s = JobStatus(*stub_, req);
  EXPECT_EQ(s.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "cases[0].kv_lens[2] = 301 is outside 1..S (S = 300)");
}

TEST_F(ServerTest, GeneratedInputsAreReproducibleFromTheSeed) {
  auto attend = [&](uint64_t seed, const v1::Tensors* tensors) {
    v1::AttendRequest req;
    *req.mutable_shape() = MakeShape(1, 16, 2, 16);
    req.set_dtype(v1::FLOAT32);
    if (tensors) {
      *req.mutable_tensors() = *tensors;
    } else {
      req.mutable_generated()->set_seed(seed);
    }
    grpc::ClientContext ctx;
    v1::AttendResponse resp;
    EXPECT_TRUE(stub_->Attend(&ctx, req, &resp).ok());
    return resp.output();
  };
  const std::string a = attend(11, nullptr), b = attend(11, nullptr), c = attend(12, nullptr);
  EXPECT_EQ(a.size(), 16u * 2 * 16 * 4);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // The documented generator: element i of q, k, v is NormalAt(seed + 0, 1, 2; i).
  v1::Tensors t;
  std::string* dst[3] = {t.mutable_q(), t.mutable_k(), t.mutable_v()};
  for (int j = 0; j < 3; ++j) {
    std::vector<float> f(16 * 2 * 16);
    for (size_t i = 0; i < f.size(); ++i) f[i] = NormalAt(11 + j, i);
    dst[j]->assign(reinterpret_cast<const char*>(f.data()), f.size() * 4);
  }
  EXPECT_EQ(attend(0, &t), a);
}

TEST_F(ServerTest, RunBenchmarkStreamsProgressResultsAndASummary) {
  v1::RunBenchmarkRequest req;
  auto* c = req.mutable_cases()->add_cases();
  c->set_section("t");
  *c->mutable_shape() = MakeShape(1, 32, 2, 16);
  c->set_dtype(v1::FLOAT32);
  c->set_backend("cpu");
  auto* unsupported = req.mutable_cases()->add_cases();
  *unsupported = *c;
  unsupported->set_backend("naive");  // a GPU backend: a result with its reason on the CPU
  req.mutable_options()->set_repeats(3);
  req.mutable_options()->set_check_numerics(true);
  grpc::ClientContext ctx;
  auto reader = stub_->RunBenchmark(&ctx, req);
  std::vector<v1::RunBenchmarkEvent> events;
  for (v1::RunBenchmarkEvent e; reader->Read(&e);) events.push_back(e);
  const grpc::Status s = reader->Finish();
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(events.size(), 1u + 2 * 2 + 1);
  EXPECT_EQ(events[0].started().total_cases(), 2);
  EXPECT_TRUE(events[1].has_case_started());
  const v1::CaseResult& r0 = events[2].result();
  EXPECT_EQ(r0.status(), grpc::OK);
  EXPECT_EQ(r0.index(), 0);
  EXPECT_EQ(r0.seed(), CaseSeed(0, 0));
  EXPECT_EQ(r0.stats().count(), 3);
  EXPECT_GT(r0.stats().median_ms(), 0);
  EXPECT_GE(r0.max_abs_error(), 0);
  EXPECT_EQ(r0.numerics(), "vs float64 reference on the host");
  EXPECT_FALSE(r0.has_fp8());  // the FP8 report is for cudnn_fp8 cases only
  const v1::CaseResult& r1 = events[4].result();
  EXPECT_EQ(r1.status(), grpc::FAILED_PRECONDITION);
  // "...; this engine was built without CUDA" follows in a build without CUDA.
  EXPECT_EQ(r1.message().substr(0, 26), "naive: needs a CUDA device") << r1.message();
  EXPECT_EQ(r1.index(), 1);
  EXPECT_EQ(r1.seed(), CaseSeed(0, 1));
  EXPECT_EQ(events[5].summary().ok(), 1);
  EXPECT_EQ(events[5].summary().unsupported(), 1);
}

// Unsupported is one code end to end: a backend this server cannot run (whatever the build) or
// a dtype or head dim a backend lacks is FAILED_PRECONDITION with the rule; a backend name the
// project never had is INVALID_ARGUMENT.
TEST_F(ServerTest, UnsupportedBackendsAreFailedPreconditionAndUnknownNamesInvalid) {
  v1::AttendRequest req;
  *req.mutable_shape() = MakeShape(1, 16, 2, 80);
  req.set_dtype(v1::FLOAT32);
  req.mutable_generated()->set_seed(1);
  for (const auto& [backend, message] : std::vector<std::pair<std::string, std::string>>{
           {"cudnn", "cudnn: needs a CUDA device"},
           {"cudnn_fp8", "cudnn_fp8: needs a CUDA device"},
           {"fused", "fused: needs a CUDA device"}}) {
    req.set_backend(backend);
    grpc::ClientContext ctx;
    v1::AttendResponse resp;
    const grpc::Status s = stub_->Attend(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::FAILED_PRECONDITION) << backend;
    EXPECT_EQ(s.error_message().substr(0, message.size()), message) << s.error_message();
  }
  req.set_backend("flash9");
  grpc::ClientContext ctx;
  v1::AttendResponse resp;
  const grpc::Status s = stub_->Attend(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("unknown backend 'flash9'"), std::string::npos)
      << s.error_message();
}

// The server owns suites and seeds: ServerInfo lists each suite's cases, and a call that runs
// some of a job's cases (case_indices) gives each the index and seed it has in the whole job, so
// the results equal those of the whole job.
TEST_F(ServerTest, CaseIndicesKeepTheJobsIndexAndSeed) {
  grpc::ClientContext info_ctx;
  v1::ServerInfo info;
  ASSERT_TRUE(stub_->GetServerInfo(&info_ctx, v1::GetServerInfoRequest(), &info).ok());
  ASSERT_EQ(info.suite_cases_size(), info.suites_size());
  for (int i = 0; i < info.suites_size(); ++i) {
    EXPECT_EQ(info.suite_cases(i).name(), info.suites(i));
    EXPECT_GT(info.suite_cases(i).cases_size(), 0) << info.suites(i);
  }
  for (const auto& v : info.backends()) {
    EXPECT_EQ(v.takes_fp8_recipe(), v.backend() == "cudnn_fp8") << v.backend();
    EXPECT_EQ(v.full_precision_peer(), v.backend() == "cudnn_fp8" ? "cudnn" : "") << v.backend();
  }

  v1::RunBenchmarkRequest job;
  for (int64_t t : {8, 16, 24}) {
    auto* c = job.mutable_cases()->add_cases();
    *c->mutable_shape() = MakeShape(1, t, 2, 16);
    c->set_dtype(v1::FLOAT32);
    c->set_backend("cpu");
  }
  job.mutable_options()->set_repeats(1);
  job.mutable_options()->set_seed(5);
  job.mutable_options()->set_check_numerics(true);
  const auto results = [&](const v1::RunBenchmarkRequest& req) {
    grpc::ClientContext ctx;
    auto reader = stub_->RunBenchmark(&ctx, req);
    std::vector<v1::CaseResult> out;
    for (v1::RunBenchmarkEvent e; reader->Read(&e);) {
      if (e.has_result()) out.push_back(e.result());
    }
    EXPECT_TRUE(reader->Finish().ok());
    return out;
  };
  const std::vector<v1::CaseResult> whole = results(job);
  ASSERT_EQ(whole.size(), 3u);
  v1::RunBenchmarkRequest part = job;
  part.add_case_indices(2);
  part.add_case_indices(0);
  const std::vector<v1::CaseResult> some = results(part);
  ASSERT_EQ(some.size(), 2u);
  for (const auto& [got, want] : {std::pair{some[0], whole[2]}, std::pair{some[1], whole[0]}}) {
    EXPECT_EQ(got.index(), want.index());
    EXPECT_EQ(got.total(), 3);
    EXPECT_EQ(got.seed(), want.seed());
    EXPECT_EQ(got.seed(), CaseSeed(5, want.index()));
    EXPECT_EQ(got.max_abs_error(), want.max_abs_error());  // the same inputs, the same output
  }
  // A suite's case alone: the case ServerInfo lists at that position, with the job's seed.
  v1::RunBenchmarkRequest suite;
  suite.set_suite("codelab");
  suite.mutable_options()->set_repeats(1);
  suite.mutable_options()->set_warmup(0);
  suite.mutable_options()->set_seed(5);
  suite.add_case_indices(1);
  const std::vector<v1::CaseResult> one = results(suite);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].index(), 1);
  EXPECT_EQ(one[0].total(), info.suite_cases(0).cases_size());
  EXPECT_EQ(one[0].seed(), CaseSeed(5, 1));
  EXPECT_EQ(one[0].case_().SerializeAsString(), info.suite_cases(0).cases(1).SerializeAsString());

  part.add_case_indices(2);
  const grpc::Status s = JobStatus(*stub_, part);
  EXPECT_EQ(s.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "case_indices[2]: case 2 is named twice");
}

struct Rule {
  std::string name;
  std::function<void(v1::AttendRequest&)> edit;
  grpc::StatusCode code;
  std::string message;
};

TEST_F(ServerTest, EachValidationRuleHasItsCodeAndMessage) {
  const std::vector<Rule> rules = {
      {"batch", [](auto& r) { r.mutable_shape()->set_batch(0); }, grpc::INVALID_ARGUMENT,
       "shape.batch: must be >= 1, got 0"},
      {"kv_len", [](auto& r) { r.mutable_shape()->set_kv_len(-3); }, grpc::INVALID_ARGUMENT,
       "shape.kv_len: must be >= 1, or 0 for the default, got -3"},
      {"gqa", [](auto& r) { r.mutable_shape()->set_num_kv_heads(3); }, grpc::INVALID_ARGUMENT,
       "shape:"},
      {"overflow",
       [](auto& r) {
         r.mutable_shape()->set_q_len(int64_t{1} << 40);
         r.mutable_shape()->set_batch(int64_t{1} << 30);
       },
       grpc::INVALID_ARGUMENT, "overflows int64"},
      {"dtype", [](auto& r) { r.set_dtype(v1::DTYPE_UNSPECIFIED); }, grpc::INVALID_ARGUMENT,
       "dtype: must be FLOAT32, BFLOAT16 or FLOAT16, got DTYPE_UNSPECIFIED"},
      {"scale", [](auto& r) { r.set_scale(-1); }, grpc::INVALID_ARGUMENT,
       "scale: must be finite and > 0"},
      {"bytes", [](auto& r) { r.mutable_tensors()->mutable_k()->resize(10); },
       grpc::INVALID_ARGUMENT,
       "tensors.k: 10 bytes, expected 2048 (B*S*K*H = 512 elements of float32, 4 bytes each)"},
      {"inputs", [](auto& r) { r.clear_tensors(); }, grpc::INVALID_ARGUMENT,
       "inputs: set either tensors"},
      {"backend", [](auto& r) { r.set_backend("flashy"); }, grpc::INVALID_ARGUMENT,
       "backend: unknown backend 'flashy'"},
      {"kv_lens count",
       [](auto& r) {
         r.add_kv_lens(4);
         r.add_kv_lens(4);
       },
       grpc::INVALID_ARGUMENT, "kv_lens has 2 values; B = 1 (one per batch element, or none)"},
      {"kv_lens range", [](auto& r) { r.add_kv_lens(17); }, grpc::INVALID_ARGUMENT,
       "kv_lens[0] = 17 is outside 1..S (S = 16)"},
      {"kv_lens zero", [](auto& r) { r.add_kv_lens(0); }, grpc::INVALID_ARGUMENT,
       "kv_lens[0] = 0 is outside 1..S (S = 16)"},
      {"unsupported", [](auto& r) { r.set_backend("naive"); }, grpc::FAILED_PRECONDITION, "naive"},
      {"output size",
       [](auto& r) {
         r.clear_tensors();
         r.mutable_generated()->set_seed(1);
         r.mutable_shape()->set_q_len(1 << 17);
       },
       grpc::INVALID_ARGUMENT, "omit_output: the 16777216-byte output exceeds"},
      {"arena",
       [](auto& r) {
         r.clear_tensors();
         r.mutable_generated()->set_seed(1);
         r.set_omit_output(true);
         r.mutable_shape()->set_kv_len(1 << 22);  // 1 GiB of K and V, few FLOPs
       },
       grpc::RESOURCE_EXHAUSTED, "for q, k, v and out alone"},
      {"cost",
       [](auto& r) {
         r.clear_tensors();
         r.mutable_generated()->set_seed(1);
         r.set_omit_output(true);
         r.mutable_shape()->set_q_len(1 << 21);
       },
       grpc::RESOURCE_EXHAUSTED, "over --max_call_seconds=30; use a smaller shape"},
  };
  for (const Rule& rule : rules) {
    v1::AttendRequest req;
    *req.mutable_shape() = MakeShape(1, 16, 2, 16);
    req.set_dtype(v1::FLOAT32);
    req.mutable_tensors()->mutable_q()->resize(16 * 2 * 16 * 4);
    req.mutable_tensors()->mutable_k()->resize(16 * 2 * 16 * 4);
    req.mutable_tensors()->mutable_v()->resize(16 * 2 * 16 * 4);
    rule.edit(req);
    grpc::ClientContext ctx;
    v1::AttendResponse resp;
    const grpc::Status s = stub_->Attend(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), rule.code) << rule.name << ": " << s.error_message();
    EXPECT_NE(s.error_message().find(rule.message), std::string::npos)
        << rule.name << ": " << s.error_message();
  }
  // Benchmark bounds.
  v1::RunBenchmarkRequest job = SlowJob(1, 5);
  job.mutable_options()->set_repeats(-1);
  const grpc::Status s = JobStatus(*stub_, job);
  EXPECT_EQ(s.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("options.repeats: must be in [1, 10000], got -1"),
            std::string::npos)
      << s.error_message();
  // The FP8 recipe's rules, with the field.
  for (const auto& [edit, message] :
       std::vector<std::pair<std::function<void(v1::Fp8Recipe&)>, std::string>>{
           {[](v1::Fp8Recipe& r) { r.set_margin(65); },
            "options.fp8_recipe.margin: must be in [0, 64], got 65"},
           {[](v1::Fp8Recipe& r) { r.set_amax_history_len(0); },
            "options.fp8_recipe.amax_history_len: must be in [1, 65536], got 0"},
           {[](v1::Fp8Recipe& r) { r.set_amax_compute_algo("mean"); },
            "options.fp8_recipe.amax_compute_algo: must be max or most_recent, got 'mean'"}}) {
    v1::RunBenchmarkRequest bad = SlowJob(1, 5);
    edit(*bad.mutable_options()->mutable_fp8_recipe());
    const grpc::Status fs = JobStatus(*stub_, bad);
    EXPECT_EQ(fs.error_code(), grpc::INVALID_ARGUMENT);
    EXPECT_NE(fs.error_message().find(message), std::string::npos) << fs.error_message();
  }
  v1::RunBenchmarkRequest suite;
  suite.set_suite("huge");
  EXPECT_EQ(JobStatus(*stub_, suite).error_message(),
            "suite: unknown 'huge'; expected codelab or large");
}

TEST_F(ServerTest, QueueFullIsUnavailableAndAQueuedCallMissesItsDeadline) {
  ServerOptions o = CpuOptions();
  o.queue_depth = 1;
  server_.reset();
  StartServer(o);
  // One job occupies the worker for seconds on any machine (its case stops at the 2 s budget);
  // one Attend waits; the next is refused.
  v1::RunBenchmarkRequest blocking = SlowJob(1, 20);
  *blocking.mutable_cases()->mutable_cases(0)->mutable_shape() = MakeShape(4, 1024, 8, 64);
  grpc::ClientContext job_ctx;
  auto reader = stub_->RunBenchmark(&job_ctx, blocking);
  v1::RunBenchmarkEvent e;
  ASSERT_TRUE(reader->Read(&e));  // started
  ASSERT_TRUE(reader->Read(&e));  // the first case is running
  v1::AttendRequest req;
  *req.mutable_shape() = MakeShape(1, 16, 2, 16);
  req.set_dtype(v1::FLOAT32);
  req.mutable_generated()->set_seed(1);
  grpc::ClientContext waiting_ctx;
  waiting_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  v1::AttendResponse waiting_resp;
  grpc::Status waiting_status;
  bool waiting_done = false;
  std::mutex mu;
  std::condition_variable cv;
  stub_->async()->Attend(&waiting_ctx, &req, &waiting_resp, [&](grpc::Status s) {
    std::lock_guard<std::mutex> lock(mu);
    waiting_status = s;
    waiting_done = true;
    cv.notify_all();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  grpc::ClientContext refused_ctx;
  v1::AttendResponse refused;
  const grpc::Status s = stub_->Attend(&refused_ctx, req, &refused);
  EXPECT_EQ(s.error_code(), grpc::UNAVAILABLE);
  EXPECT_NE(s.error_message().find("queue full: 1 of 1 requests waiting on device 0"),
            std::string::npos)
      << s.error_message();
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return waiting_done; });
  EXPECT_EQ(waiting_status.error_code(), grpc::DEADLINE_EXCEEDED);
  job_ctx.TryCancel();
  while (reader->Read(&e)) {
  }
  reader->Finish();
}

TEST_F(ServerTest, ClientCancelStopsABenchmarkWithinOneCase) {
  grpc::ClientContext ctx;
  auto reader = stub_->RunBenchmark(&ctx, SlowJob(40, 3));
  v1::RunBenchmarkEvent e;
  int results = 0;
  while (results < 1 && reader->Read(&e)) results += e.has_result();
  ctx.TryCancel();
  while (reader->Read(&e)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::CANCELLED);
  // The server finished the job (it is no longer in flight) well before 40 cases.
  const auto scrape_cases = [&] {
    const std::string m = server_->metrics().Render();
    std::smatch match;
    static const std::regex re(
        "attn_benchmark_cases_total\\{backend=\"reference\",status=\"OK\"\\} ([0-9]+)");
    return std::regex_search(m, match, re) ? std::stoi(match[1]) : 0;
  };
  for (int i = 0; i < 100 && server_->metrics().inflight.load() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(server_->metrics().inflight.load(), 0);
  const int done = scrape_cases();
  EXPECT_LE(done, 3) << "cases kept running after the cancel";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(scrape_cases(), done);
}

TEST_F(ServerTest, AnotherClientsAttendIsServedBetweenCasesOfASweep) {
  v1::RunBenchmarkRequest job = SlowJob(30, 1);
  job.set_client_id("participant-a");
  grpc::ClientContext ctx;
  auto reader = stub_->RunBenchmark(&ctx, job);
  v1::RunBenchmarkEvent e;
  int results = 0;
  while (results < 1 && reader->Read(&e)) results += e.has_result();
  v1::AttendRequest req;
  *req.mutable_shape() = MakeShape(1, 16, 2, 16);
  req.set_dtype(v1::FLOAT32);
  req.mutable_generated()->set_seed(1);
  req.set_client_id("participant-b");
  grpc::ClientContext actx;
  v1::AttendResponse resp;
  ASSERT_TRUE(stub_->Attend(&actx, req, &resp).ok());
  // B waited for at most the case in progress, not for the rest of A's sweep.
  int after = 0;
  while (reader->Read(&e)) after += e.has_result();
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_GE(after, 25) << "B's Attend was served only after most of A's sweep";
}

// Every backend x case status is there at 0 from start-up, so rates and dashboards have the
// series before the first benchmark, and the first case counts as an increase.
TEST_F(ServerTest, BenchmarkCaseCountersStartAtZeroForEveryBackendAndStatus) {
  const std::string before = server_->metrics().Render();
  for (const auto& backend : BackendRegistry::Default().backends()) {
    for (const char* status : kBenchmarkCaseStatuses) {
      const std::string series = "attn_benchmark_cases_total{backend=\"" + backend->name() +
                                 "\",status=\"" + status + "\"} 0\n";
      EXPECT_NE(before.find(series), std::string::npos) << series;
    }
  }
  grpc::ClientContext ctx;
  auto reader = stub_->RunBenchmark(&ctx, SlowJob(1, 1));
  v1::RunBenchmarkEvent e;
  while (reader->Read(&e)) {
  }
  ASSERT_TRUE(reader->Finish().ok());
  const std::string after = server_->metrics().Render();
  EXPECT_NE(after.find("attn_benchmark_cases_total{backend=\"reference\",status=\"OK\"} 1\n"),
            std::string::npos)
      << after;
  EXPECT_NE(
      after.find("attn_benchmark_cases_total{backend=\"reference\",status=\"CANCELLED\"} 0\n"),
      std::string::npos);
}

TEST_F(ServerTest, MetricsAreServedOverHttpAndPassPromtool) {
  grpc::ClientContext ctx;
  v1::ServerInfo info;
  ASSERT_TRUE(stub_->GetServerInfo(&ctx, {}, &info).ok());
  v1::AttendRequest req;
  *req.mutable_shape() = MakeShape(1, 16, 2, 16);
  req.set_dtype(v1::FLOAT32);
  req.mutable_generated()->set_seed(1);
  grpc::ClientContext actx;
  v1::AttendResponse resp;
  ASSERT_TRUE(stub_->Attend(&actx, req, &resp).ok());
  const std::string http = ::attn::testing::HttpGet(server_->metrics_port(), "/metrics");
  ASSERT_NE(http.find(" 200 OK\r\n"), std::string::npos) << http.substr(0, 200);
  for (const char* name :
       {"attn_request_duration_seconds_bucket{code=\"OK\",rpc=\"Attend\"", "attn_requests_total",
        "attn_queue_wait_seconds_bucket",
        "attn_device_time_seconds_bucket{backend=\"cpu\",causal=\"false\",dtype=\"float32\"",
        "attn_queue_depth{device=\"0\"}", "attn_arena_used_bytes", "attn_arena_capacity_bytes",
        "attn_inflight_requests", "attn_serving 1", "attn_build_info", "attn_device_info"}) {
    EXPECT_NE(http.find(name), std::string::npos) << name;
  }
  EXPECT_NE(::attn::testing::HttpGet(server_->metrics_port(), "/").find("404"), std::string::npos);
  if (system("command -v promtool > /dev/null 2>&1") != 0) {
    GTEST_SKIP()
        << "promtool not installed (Debian package prometheus; scripts/deps.sh installs it)";
  }
  const std::string path = ::attn::testing::ScratchDir() + "metrics.txt";
  std::ofstream(path) << http.substr(http.find("\r\n\r\n") + 4);
  const std::string cmd = "promtool check metrics < " + path + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof(buf), p)) out += buf;
  EXPECT_EQ(pclose(p), 0) << out;
  EXPECT_EQ(out, "") << out;
}

// The binary under SIGTERM: readiness goes NOT_SERVING (liveness stays SERVING), new work is
// refused, the accepted job finishes every case, and the process exits 0.
TEST(ServerProcess, SigtermDrainsAcceptedWorkAndExitsZero) {
  ::attn::testing::ServerProcess server("sigterm", {"--shutdown_grace_s=20"});
  const int port = server.port();
  ASSERT_GT(port, 0) << "no SERVING line in " << server.log() << ":\n"
                     << ::attn::testing::ReadTextFile(server.log());
  auto stub = Connect(port);
  grpc::ClientContext ctx;
  auto reader = stub->RunBenchmark(&ctx, SlowJob(6, 3));
  v1::RunBenchmarkEvent e;
  int results = 0;
  while (results < 1 && reader->Read(&e)) results += e.has_result();
  ASSERT_TRUE(server.Signal(SIGTERM));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // New work is refused and readiness says NOT_SERVING while the job drains; liveness still
  // says SERVING, so a liveness probe does not kill the drain.
  EXPECT_EQ(HealthStatus(port, kReadinessService), kNotServing);
  EXPECT_EQ(HealthStatus(port, kLivenessService), kServing);
  v1::AttendRequest req;
  *req.mutable_shape() = MakeShape(1, 16, 2, 16);
  req.set_dtype(v1::FLOAT32);
  req.mutable_generated()->set_seed(1);
  grpc::ClientContext actx;
  v1::AttendResponse resp;
  const grpc::Status refused = stub->Attend(&actx, req, &resp);
  EXPECT_EQ(refused.error_code(), grpc::UNAVAILABLE) << refused.error_message();
  bool summary = false;
  while (reader->Read(&e)) {
    results += e.has_result();
    summary = summary || e.has_summary();
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(results, 6);
  EXPECT_TRUE(summary);
  const int status = server.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}

}  // namespace
}  // namespace attn::server

namespace attn::server {
namespace {

// Every binary's --help lists each flag its main file defines, with the default, and exits 0
// (absl's own --help printed "No flags matched" and exited 1).
TEST(Binaries, HelpListsEveryFlagWithItsDefault) {
  using ::attn::testing::BinaryPath;
  const std::pair<std::string, const char*> binaries[] = {
      {BinaryPath("ATTN_SERVER_BINARY", ATTN_SERVER_BINARY), "server/main.cc"},
      {BinaryPath("ATTN_BENCH_BINARY", ATTN_BENCH_BINARY), "engine/tools/attn_bench.cc"},
      {BinaryPath("ATTN_LOAD_BINARY", ATTN_LOAD_BINARY), "bench/attn_load.cc"}};
  const std::regex flag_def("ABSL_FLAG\\([^,]+,\\s*([a-z0-9_]+),\\s*([^,]+),");
  for (const auto& [binary, source] : binaries) {
    SCOPED_TRACE(binary);
    FILE* p = popen((binary + " --help 2>&1").c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    char buf[4096];
    while (fgets(buf, sizeof(buf), p)) out += buf;
    const int status = pclose(p);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
    const std::string text = ::attn::testing::ReadTextFile(
        BinaryPath("ATTN_SOURCE_DIR", ATTN_SOURCE_DIR) + "/" + source);
    int flags = 0;
    for (std::sregex_iterator it(text.begin(), text.end(), flag_def), end; it != end;
         ++it, ++flags) {
      EXPECT_NE(out.find("--" + (*it)[1].str() + " (default: "), std::string::npos)
          << (*it)[1] << " missing from --help:\n"
          << out;
    }
    EXPECT_GT(flags, 5) << "no ABSL_FLAG found in " << source;
  }
}

}  // namespace
}  // namespace attn::server
