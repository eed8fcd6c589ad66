// Issue 19's promises, end to end on the cpu backend: a request over the cost caps is refused
// before it queues; an admitted long call stops at its deadline or its client's cancel and frees
// the worker at once; SIGTERM with a busy worker and a full queue answers every client and exits
// within the grace and a few seconds.
#include "server/admission.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "attention/v1/attention.grpc.pb.h"
#include "attn/device.h"
#include "attn/registry.h"
#include "engine/test_util.h"
#include "gtest/gtest.h"
#include "server/server.h"
#include "server/server_helpers.h"
#include "server_process.h"

namespace attn::server {
namespace {
namespace v1 = attention::v1;
using ::attn::testing::Connect;
using ::attn::testing::CpuOptions;
using ::attn::testing::MakeShape;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

v1::AttendRequest Generated(const v1::Shape& shape) {
  v1::AttendRequest r;
  *r.mutable_shape() = shape;
  r.set_dtype(v1::FLOAT32);
  r.set_backend("cpu");
  r.mutable_generated()->set_seed(7);
  r.set_omit_output(true);
  return r;
}

// A call of several seconds on the float64 reference backend (69 GFLOP), which checks its stop
// token as it goes, well under the caps these tests set.
v1::AttendRequest LongCall() {
  v1::AttendRequest r = Generated(MakeShape(1, 16384, 1, 64));
  r.set_backend("reference");
  return r;
}
v1::AttendRequest SmallCall() { return Generated(MakeShape(1, 16, 2, 16)); }

// The value of `series` in a scrape, or -1.
double Scraped(Server& server, const std::string& series) {
  return ::attn::testing::SeriesValue(server.metrics().Render(), series);
}

// An Attend started on another thread; Wait() gives its status.
class AsyncAttend {
 public:
  AsyncAttend(v1::AttentionService::Stub& stub, v1::AttendRequest request, double deadline_s) {
    ctx_.set_deadline(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(static_cast<int64_t>(deadline_s * 1e3)));
    request_ = std::move(request);
    stub.async()->Attend(&ctx_, &request_, &response_, [this](grpc::Status s) {
      std::lock_guard<std::mutex> lock(mu_);
      status_ = std::move(s);
      done_ = Clock::now();
      finished_ = true;
      cv_.notify_all();
    });
  }
  grpc::Status Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return finished_; });
    return status_;
  }
  Clock::time_point done() {
    Wait();
    return done_;
  }
  grpc::ClientContext& context() { return ctx_; }

 private:
  grpc::ClientContext ctx_;
  v1::AttendRequest request_;
  v1::AttendResponse response_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool finished_ = false;
  grpc::Status status_;
  Clock::time_point done_;
};

class AdmissionTest : public ::testing::Test {
 protected:
  void Start(ServerOptions o) {
    auto s = Server::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
    stub_ = Connect(server_->port());
  }
  // A small call right after: it must run at once, the worker free and the device clean.
  void ExpectTheNextSmallCallRunsAtOnce(Clock::time_point since, const char* after) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::AttendRequest small = SmallCall();
    small.set_omit_output(false);
    v1::AttendResponse resp;
    const grpc::Status s = stub_->Attend(&ctx, small, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.output().size(), 16u * 2 * 16 * 4);
    EXPECT_LT(SecondsSince(since), 1.0) << "the worker was not free within 1 s " << after;
    // The worker gives the small call's buffers back just after replying.
    for (int i = 0; i < 50 && Scraped(*server_, "attn_arena_used_bytes{device=\"0\"}") != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(Scraped(*server_, "attn_arena_used_bytes{device=\"0\"}"), 0);
  }

  std::unique_ptr<Server> server_;
  std::unique_ptr<v1::AttentionService::Stub> stub_;
};

// Admission counts every key (WithAllKeys): lengths never lower an estimate, since some
// backends (naive) compute every score whatever the lengths are.
TEST(AdmissionCost, KvLensNeverLowerTheEstimate) {
  const Throughputs rates = Throughputs::Fixed({{{"cpu", DType::kBFloat16}, 1e9}}, 1e10, 1e9);
  const Backend& cpu = *BackendRegistry::Default().Find("cpu");
  auto p = AttentionProblem::SelfAttention(4, 1, 8, 64, DType::kBFloat16, false, 2);
  p.kv_len = 4096;
  auto ragged = p;
  ragged.kv_lens = {1, 2, 3, 4};
  const Cost dense = CallCost(PlanCall(cpu, p), rates);
  const Cost short_lens = CallCost(PlanCall(cpu, ragged), rates);
  EXPECT_EQ(short_lens.seconds, dense.seconds);
  EXPECT_EQ(short_lens.flops, dense.flops);
  EXPECT_EQ(short_lens.bytes, dense.bytes);
  BenchOptions options;
  options.check_numerics = true;
  auto ragged_plan = PlanCase({"", ragged, "cpu"}, options, CpuDeviceInfo());
  auto dense_plan = PlanCase({"", p, "cpu"}, options, CpuDeviceInfo());
  ASSERT_TRUE(ragged_plan.ok()) << ragged_plan.status();
  ASSERT_TRUE(dense_plan.ok()) << dense_plan.status();
  EXPECT_EQ(CaseCost(*ragged_plan, rates).seconds, CaseCost(*dense_plan, rates).seconds);
}

TEST_F(AdmissionTest, AnAttendOverTheCallCapIsRefusedBeforeItQueues) {
  Start(CpuOptions());
  // A few bytes naming a huge problem: 2^21 positions.
  grpc::ClientContext ctx;
  v1::AttendResponse resp;
  const auto start = Clock::now();
  const grpc::Status s = stub_->Attend(&ctx, Generated(MakeShape(1, 1 << 21, 2, 16)), &resp);
  EXPECT_LT(SecondsSince(start), 0.5);
  EXPECT_EQ(s.error_code(), grpc::RESOURCE_EXHAUSTED);
  for (const char* part :
       {"563 TFLOP", "est. ", "s of device time", "over --max_call_seconds=30"}) {
    EXPECT_NE(s.error_message().find(part), std::string::npos)
        << part << " in " << s.error_message();
  }
  EXPECT_EQ(Scraped(*server_, "attn_queue_wait_seconds_count{device=\"0\"}"), -1)
      << "the refused call took a queue slot";
}

TEST_F(AdmissionTest, AJobOverTheJobCapIsRefusedBeforeItsFirstCase) {
  ServerOptions o = CpuOptions();
  o.admission.max_call_seconds = 5;
  o.admission.max_job_seconds = 20;
  Start(o);
  v1::RunBenchmarkRequest job;
  for (int i = 0; i < 50; ++i) {
    auto* c = job.mutable_cases()->add_cases();
    *c->mutable_shape() = MakeShape(2, 256, 8, 64);
    c->set_dtype(v1::FLOAT32);
    c->set_backend("reference");
  }
  job.mutable_options()->set_repeats(10000);  // each case runs to its 2 s budget: ~150 s in all
  grpc::ClientContext ctx;
  auto reader = stub_->RunBenchmark(&ctx, job);
  v1::RunBenchmarkEvent e;
  int events = 0;
  while (reader->Read(&e)) ++events;
  const grpc::Status s = reader->Finish();
  EXPECT_EQ(events, 0);
  EXPECT_EQ(s.error_code(), grpc::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("job: 50 cases cost"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("over --max_job_seconds=20"), std::string::npos)
      << s.error_message();
  // One case whose single call is over the call cap is named.
  v1::RunBenchmarkRequest big;
  auto* c = big.mutable_cases()->add_cases();
  c->set_section("huge");
  *c->mutable_shape() = MakeShape(1, 1 << 18, 1, 64);
  c->set_dtype(v1::FLOAT32);
  c->set_backend("cpu");
  grpc::ClientContext ctx2;
  auto reader2 = stub_->RunBenchmark(&ctx2, big);
  while (reader2->Read(&e)) {
  }
  const grpc::Status s2 = reader2->Finish();
  EXPECT_EQ(s2.error_code(), grpc::RESOURCE_EXHAUSTED);
  EXPECT_NE(s2.error_message().find("cases[0] (huge)"), std::string::npos) << s2.error_message();
  EXPECT_NE(s2.error_message().find("over --max_call_seconds=5"), std::string::npos)
      << s2.error_message();
}

TEST_F(AdmissionTest, AnAdmittedLongCallStopsAtItsDeadlineAndFreesTheWorker) {
  ServerOptions o = CpuOptions();
  o.admission.max_call_seconds = 120;  // the long call is admitted on a slow or loaded machine
  Start(o);
  AsyncAttend long_call(*stub_, LongCall(), 1.0);
  const auto deadline = Clock::now() + std::chrono::seconds(1);
  EXPECT_EQ(long_call.Wait().error_code(), grpc::DEADLINE_EXCEEDED);
  std::this_thread::sleep_until(deadline);
  ExpectTheNextSmallCallRunsAtOnce(deadline, "of the long call's deadline");
  // The server logged and counted what the client got.
  for (int i = 0;
       i < 50 &&
       Scraped(*server_, "attn_requests_total{code=\"DEADLINE_EXCEEDED\",rpc=\"Attend\"}") < 1;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(Scraped(*server_, "attn_requests_total{code=\"DEADLINE_EXCEEDED\",rpc=\"Attend\"}"), 1);
  EXPECT_EQ(Scraped(*server_, "attn_requests_total{code=\"OK\",rpc=\"Attend\"}"), 1);
}

TEST_F(AdmissionTest, AClientCancelStopsARunningAttend) {
  ServerOptions o = CpuOptions();
  o.admission.max_call_seconds = 120;
  Start(o);
  AsyncAttend long_call(*stub_, LongCall(), 60);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto cancelled = Clock::now();
  long_call.context().TryCancel();
  EXPECT_EQ(long_call.Wait().error_code(), grpc::CANCELLED);
  ExpectTheNextSmallCallRunsAtOnce(cancelled, "of the client's cancel");
  EXPECT_EQ(Scraped(*server_, "attn_requests_total{code=\"CANCELLED\",rpc=\"Attend\"}"), 1);
}

TEST_F(AdmissionTest, ABenchmarkCaseStopsMidCallAtTheJobsDeadline) {
  ServerOptions o = CpuOptions();
  o.admission.max_call_seconds = 120;
  Start(o);
  v1::RunBenchmarkRequest job;
  auto* c = job.mutable_cases()->add_cases();
  *c = v1::BenchmarkCase();
  *c->mutable_shape() = MakeShape(1, 16384, 1, 64);
  c->set_dtype(v1::FLOAT32);
  c->set_backend("reference");
  job.mutable_options()->set_warmup(0);
  job.mutable_options()->set_repeats(1);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
  const auto deadline = Clock::now() + std::chrono::seconds(1);
  auto reader = stub_->RunBenchmark(&ctx, job);
  v1::RunBenchmarkEvent e;
  while (reader->Read(&e)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::DEADLINE_EXCEEDED);
  std::this_thread::sleep_until(deadline);
  ExpectTheNextSmallCallRunsAtOnce(deadline, "of the job's deadline");
}

// The binary under SIGTERM while its worker runs a long call and the queue is full: within the
// grace and 3 s more every client has its answer and the process has exited 0.
TEST(AdmissionProcess, SigtermWithABusyWorkerAndAFullQueueAnswersEveryoneWithinTheGrace) {
  ::attn::testing::ServerProcess server(
      "drain", {"--shutdown_grace_s=1", "--queue_depth=3", "--max_call_seconds=120"});
  ASSERT_GT(server.port(), 0) << ::attn::testing::ReadTextFile(server.log());
  auto stub = Connect(server.port());
  std::vector<std::unique_ptr<AsyncAttend>> calls;
  calls.push_back(std::make_unique<AsyncAttend>(*stub, LongCall(), 60));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the long call is running
  for (int i = 0; i < 3; ++i)
    calls.push_back(std::make_unique<AsyncAttend>(*stub, SmallCall(), 60));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the three are queued
  // A benchmark job too, queued behind them (a job's first case takes a slot like an Attend:
  // the queue is full, so it is refused at once with UNAVAILABLE).
  grpc::ClientContext job_ctx;
  auto job = v1::RunBenchmarkRequest();
  auto* c = job.mutable_cases()->add_cases();
  *c->mutable_shape() = MakeShape(1, 64, 2, 16);
  c->set_dtype(v1::FLOAT32);
  auto reader = stub->RunBenchmark(&job_ctx, job);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto sigterm = Clock::now();
  ASSERT_TRUE(server.Signal(SIGTERM));
  for (auto& call : calls) {
    const grpc::Status s = call->Wait();
    EXPECT_EQ(s.error_code(), grpc::UNAVAILABLE) << s.error_message();
    EXPECT_NE(s.error_message().find("shutting down"), std::string::npos) << s.error_message();
    EXPECT_LT(std::chrono::duration<double>(call->done() - sigterm).count(), 1 + 3);
  }
  v1::RunBenchmarkEvent e;
  while (reader->Read(&e)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::UNAVAILABLE);
  const int status = server.Wait();
  EXPECT_LT(SecondsSince(sigterm), 1 + 3) << "the process outlived its grace by more than 3 s";
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The log says what each client got: no OK line for a call that got an error.
  const std::string log = ::attn::testing::ReadTextFile(server.log());
  EXPECT_EQ(std::regex_search(log, std::regex("rpc=Attend code=OK")), false) << log;
  EXPECT_NE(log.find("rpc=Attend code=UNAVAILABLE"), std::string::npos) << log;
}

// --- The same promises on a GPU, for the fused and cudnn backends (skip without one) ------

class AdmissionGpu : public AdmissionTest, public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device on this machine";
    ServerOptions o = CpuOptions();
    o.devices = "0";
    o.arena_bytes = int64_t{16} << 30;
    o.limits.max_request_bytes = int64_t{64} << 20;
    Start(o);
  }
  // About a second on an H200 (5.6e14 FLOP, 5.4 GB of tensors), far under the 30 s call cap.
  v1::AttendRequest Long() const {
    v1::AttendRequest r = Generated(MakeShape(2, 131072, 32, 128, 8));
    r.set_dtype(v1::BFLOAT16);
    r.set_backend(GetParam());
    return r;
  }
  // A small call with uploaded inputs, compared with the float64 reference.
  void ExpectASmallCallRightWithin(Clock::time_point since, double seconds, const char* after) {
    const auto p = AttentionProblem::SelfAttention(2, 300, 8, 128, DType::kBFloat16, true, 2);
    const auto in = ::attn::testing::RandomInputs(p, 11);
    v1::AttendRequest req;
    *req.mutable_shape() = MakeShape(2, 300, 8, 128, 2);
    req.set_dtype(v1::BFLOAT16);
    req.set_causal(true);
    req.set_backend(GetParam());
    req.mutable_tensors()->set_q(std::string(in.q.bytes.begin(), in.q.bytes.end()));
    req.mutable_tensors()->set_k(std::string(in.k.bytes.begin(), in.k.bytes.end()));
    req.mutable_tensors()->set_v(std::string(in.v.bytes.begin(), in.v.bytes.end()));
    grpc::ClientContext ctx;
    v1::AttendResponse resp;
    const grpc::Status s = stub_->Attend(&ctx, req, &resp);
    const double took = SecondsSince(since);
    ASSERT_TRUE(s.ok()) << s.error_message();
    std::printf("%s: the next call was answered %.3f s %s\n", GetParam().c_str(), took, after);
    EXPECT_LT(took, seconds) << after;
    const std::vector<uint8_t> bytes(resp.output().begin(), resp.output().end());
    const auto cmp = ::attn::testing::Compare(::attn::testing::Decode(bytes, p.dtype),
                                              ::attn::testing::Reference(in),
                                              ::attn::testing::ToleranceFor(p.dtype));
    EXPECT_TRUE(cmp.within) << cmp.ToString();
    for (int i = 0; i < 50 && Scraped(*server_, "attn_arena_used_bytes{device=\"0\"}") != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(Scraped(*server_, "attn_arena_used_bytes{device=\"0\"}"), 0);
  }
};

TEST_P(AdmissionGpu, ALongCallStopsAtItsDeadlineAndTheNextCallIsRight) {
  AsyncAttend call(*stub_, Long(), 0.3);
  const auto deadline = Clock::now() + std::chrono::milliseconds(300);
  EXPECT_EQ(call.Wait().error_code(), grpc::DEADLINE_EXCEEDED);
  std::this_thread::sleep_until(deadline);
  ExpectASmallCallRightWithin(deadline, 1.0, "after the long call's deadline");
}

TEST_P(AdmissionGpu, AClientCancelStopsALongCall) {
  AsyncAttend call(*stub_, Long(), 60);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto cancelled = Clock::now();
  call.context().TryCancel();
  EXPECT_EQ(call.Wait().error_code(), grpc::CANCELLED);
  ExpectASmallCallRightWithin(cancelled, 1.0, "after the client's cancel");
}

TEST_P(AdmissionGpu, OverTheCapsIsRefusedUpFront) {
  grpc::ClientContext ctx;
  v1::AttendResponse resp;
  v1::AttendRequest huge = Long();
  huge.mutable_shape()->set_batch(1024);
  grpc::Status s = stub_->Attend(&ctx, huge, &resp);
  EXPECT_EQ(s.error_code(), grpc::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("over --max_call_seconds=30"), std::string::npos)
      << s.error_message();
  // One causal head cannot be split: est. several seconds is refused.
  v1::AttendRequest head = Generated(MakeShape(1, 1 << 21, 1, 128));
  head.set_dtype(v1::BFLOAT16);
  head.set_causal(true);
  head.set_backend(GetParam());
  grpc::ClientContext ctx2;
  s = stub_->Attend(&ctx2, head, &resp);
  EXPECT_EQ(s.error_code(), grpc::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_NE(s.error_message().find("one causal head"), std::string::npos) << s.error_message();
}

INSTANTIATE_TEST_SUITE_P(Backends, AdmissionGpu, ::testing::Values("fused", "cudnn"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           return param.param;
                         });

// SIGTERM with the GPU's worker busy on a long call and the queue full.
TEST(AdmissionGpuProcess, SigtermWithABusyGpuAndAFullQueueAnswersEveryoneWithinTheGrace) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device on this machine";
  ::attn::testing::ServerProcess server(
      "drain_gpu", {"--devices=0", "--arena_mib=16384", "--shutdown_grace_s=1", "--queue_depth=3"});
  ASSERT_GT(server.port(), 0) << ::attn::testing::ReadTextFile(server.log());
  auto stub = Connect(server.port());
  std::vector<std::unique_ptr<AsyncAttend>> calls;
  for (int i = 0; i < 4; ++i) {  // each ~1 s on an H200: one runs, three wait
    v1::AttendRequest r = Generated(MakeShape(2, 131072, 32, 128, 8));
    r.set_dtype(v1::BFLOAT16);
    r.set_backend("fused");
    calls.push_back(std::make_unique<AsyncAttend>(*stub, r, 60));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const auto sigterm = Clock::now();
  ASSERT_TRUE(server.Signal(SIGTERM));
  int ok = 0;
  for (auto& call : calls) {
    const grpc::Status s = call->Wait();
    ok += s.ok();
    if (!s.ok()) {
      EXPECT_EQ(s.error_code(), grpc::UNAVAILABLE) << s.error_message();
      EXPECT_NE(s.error_message().find("shutting down"), std::string::npos) << s.error_message();
    }
    EXPECT_LT(std::chrono::duration<double>(call->done() - sigterm).count(), 1 + 3);
  }
  const int status = server.Wait();
  std::printf("drain on the GPU: %d of 4 calls finished in the grace, exit after %.2f s\n", ok,
              SecondsSince(sigterm));
  EXPECT_LT(SecondsSince(sigterm), 1 + 3);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace attn::server
