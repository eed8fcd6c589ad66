// A careless or hostile participant against a real attn-server process (issue 42), each attack
// a test: what the attacker gets, and that the server's memory, log and other participants stay
// as they were. Every test talks to the binary over gRPC (ATTN_SERVER_BINARY may name another
// build), so the same tests run against an older server to show what it let through.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "attention/v1/attention.grpc.pb.h"
#include "bench/loopback.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "server/auth.h"
#include "server/server_helpers.h"
#include "server/tokens_file_helpers.h"
#include "server_process.h"

namespace attn::server {
namespace {
namespace v1 = attention::v1;
using ::attn::testing::Connect;
using ::attn::testing::MakeShape;
using ::attn::testing::ReadTextFile;
using ::attn::testing::ScratchDir;
using ::attn::testing::ServerProcess;
using ::attn::testing::TokensLine;
using ::attn::testing::WriteTokensFile;
using Clock = std::chrono::steady_clock;

// A tokens file (mode 0600) with a participant NAME per name, token "NAME-token"; its flag.
std::string TokensFlag(const std::vector<std::string>& names, const std::string& file) {
  std::string text;
  for (const std::string& n : names) text += TokensLine(n, n + "-token");
  const std::string path = ScratchDir() + file;
  WriteTokensFile(path, text);
  return "--tokens_file=" + path;
}

void Authorize(grpc::ClientContext& ctx, const std::string& name) {
  ctx.AddMetadata("authorization", "Bearer " + name + "-token");
}

void Deadline(grpc::ClientContext& ctx, double seconds) {
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(static_cast<int64_t>(seconds * 1e3)));
}

v1::AttendRequest Generated(const v1::Shape& shape) {
  v1::AttendRequest r;
  *r.mutable_shape() = shape;
  r.set_dtype(v1::FLOAT32);
  r.mutable_generated()->set_seed(1);
  r.set_omit_output(true);
  return r;
}

// An Attend carrying q, k and v of `mib` MiB in all (float32 B1 S=T N1 H256).
v1::AttendRequest WithTensors(int64_t mib) {
  const int64_t t = (mib << 20) / (3 * 256 * 4);
  v1::AttendRequest r;
  *r.mutable_shape() = MakeShape(1, t, 1, 256);
  r.set_dtype(v1::FLOAT32);
  for (std::string* s : {r.mutable_tensors()->mutable_q(), r.mutable_tensors()->mutable_k(),
                         r.mutable_tensors()->mutable_v()}) {
    s->assign(static_cast<size_t>(t * 256 * 4), '\0');
  }
  r.set_omit_output(true);
  return r;
}

// The server's peak resident memory so far (VmHWM), bytes.
int64_t PeakRss(pid_t pid) {
  const std::string status = ReadTextFile("/proc/" + std::to_string(pid) + "/status");
  std::smatch m;
  static const std::regex re("VmHWM:\\s+([0-9]+) kB");
  return std::regex_search(status, m, re) ? std::stoll(m[1]) * 1024 : -1;
}

int64_t FileSize(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

// Runs `n` calls of `fn` on `threads` threads at once.
void Concurrently(int threads, const std::function<void(int)>& fn) {
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) pool.emplace_back(fn, i);
  for (auto& t : pool) t.join();
}

TEST(Hostile, AHugeOrOddClientIdIsRefusedNamingTheRuleAndTheLogStaysSmall) {
  ServerProcess server("client_id");
  ASSERT_GT(server.port(), 0) << ReadTextFile(server.log());
  auto stub = Connect(server.port());
  const int64_t log_before = FileSize(server.log());
  for (const std::string& id : {std::string(20 << 20, 'x'), std::string("tab\there"),
                                std::string("ünïcode"), std::string(65, 'a')}) {
    v1::AttendRequest r = Generated(MakeShape(1, 16, 1, 16));
    r.set_client_id(id);
    grpc::ClientContext ctx;
    v1::AttendResponse resp;
    const grpc::Status s = stub->Attend(&ctx, r, &resp);
    EXPECT_EQ(s.error_code(), grpc::INVALID_ARGUMENT) << id.substr(0, 20);
    EXPECT_NE(s.error_message().find("client_id: at most 64 of A-Z a-z 0-9 . _ -"),
              std::string::npos)
        << s.error_message().substr(0, 200);
    EXPECT_LT(s.error_message().size(), 300u);
  }
  v1::AttendRequest fine = Generated(MakeShape(1, 16, 1, 16));
  fine.set_client_id("notebook-3.a_b");
  grpc::ClientContext ctx;
  v1::AttendResponse resp;
  EXPECT_TRUE(stub->Attend(&ctx, fine, &resp).ok());
  // Five request lines: a few hundred bytes each, not the 20 MB id.
  EXPECT_LT(FileSize(server.log()) - log_before, 8 * 1024);
}

TEST(Hostile, RotatingClientIdsDoesNotEscapeTheQuotas) {
  // Without tokens the quotas are keyed by the caller's address: one benchmark job at a time.
  ServerProcess server("rotate", {"--participant_max_jobs=1"});
  ASSERT_GT(server.port(), 0) << ReadTextFile(server.log());
  auto stub = Connect(server.port());
  v1::RunBenchmarkRequest slow;
  for (int i = 0; i < 40; ++i) {
    auto* c = slow.mutable_cases()->add_cases();
    *c->mutable_shape() = MakeShape(1, 256, 4, 64);
    c->set_dtype(v1::FLOAT32);
  }
  slow.mutable_options()->set_repeats(5);
  slow.set_client_id("first");
  grpc::ClientContext first;
  auto reader = stub->RunBenchmark(&first, slow);
  v1::RunBenchmarkEvent e;
  ASSERT_TRUE(reader->Read(&e));  // started: the job is admitted
  slow.set_client_id("second");
  grpc::ClientContext second;
  auto other = stub->RunBenchmark(&second, slow);
  while (other->Read(&e)) {
  }
  const grpc::Status s = other->Finish();
  EXPECT_EQ(s.error_code(), grpc::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_NE(s.error_message().find("jobs"), std::string::npos) << s.error_message();
  first.TryCancel();
  while (reader->Read(&e)) {
  }
  reader->Finish();
}

TEST(Hostile, WithTokensEveryServiceButHealthNeedsOneReflectionIncluded) {
  ServerProcess server("gate", {TokensFlag({"ada"}, "gate_tokens.txt")});
  ASSERT_GT(server.port(), 0) << ReadTextFile(server.log());
  auto channel = grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
  grpc::GenericStub generic(channel);
  const auto call = [&](const std::string& method, bool token) {
    grpc::ClientContext ctx;
    if (token) Authorize(ctx, "ada");
    Deadline(ctx, 10);
    return ::attn::loopback::RawUnaryCall(generic, ctx, method, "");
  };
  for (const char* method :
       {"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        "/attention.v1.AttentionService/GetServerInfo", "/attention.v1.AttentionService/Attend",
        "/attention.v1.AttentionService/RunBenchmark", "/inference.GRPCInferenceService/ServerLive",
        "/inference.GRPCInferenceService/ModelInfer", "/no.such.Service/Method"}) {
    const grpc::Status s = call(method, false);
    EXPECT_EQ(s.error_code(), grpc::UNAUTHENTICATED) << method << ": " << s.error_message();
  }
  EXPECT_TRUE(call("/grpc.health.v1.Health/Check", false).ok());
  EXPECT_TRUE(call("/attention.v1.AttentionService/GetServerInfo", true).ok());
  EXPECT_NE(
      call("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", true).error_code(),
      grpc::UNAUTHENTICATED);
}

TEST(Hostile, UnauthenticatedLargeBodiesAreRefusedBeforeTheyAreRead) {
  ServerProcess server("bodies", {TokensFlag({"ada"}, "bodies_tokens.txt")});
  ASSERT_GT(server.port(), 0) << ReadTextFile(server.log());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const int64_t before = PeakRss(server.pid());
  const v1::AttendRequest big = WithTensors(60);
  std::atomic<int> unauthenticated{0};
  Concurrently(8, [&](int) {
    auto stub = Connect(server.port());
    for (int i = 0; i < 3; ++i) {
      grpc::ClientContext ctx;
      Deadline(ctx, 30);
      v1::AttendResponse resp;
      if (stub->Attend(&ctx, big, &resp).error_code() == grpc::UNAUTHENTICATED) ++unauthenticated;
    }
  });
  EXPECT_EQ(unauthenticated.load(), 24);
  // 24 bodies of 60 MiB, 8 at a time: read and parsed they would raise the peak by 480 MiB.
  const int64_t grown = PeakRss(server.pid()) - before;
  std::printf("peak RSS %.1f MiB before, %.1f MiB more after 24 unauthenticated 60 MiB bodies\n",
              before / 1048576.0, grown / 1048576.0);
  EXPECT_LT(grown, int64_t{64} << 20);
}

TEST(Hostile, TokensOverPlaintextBeyondLoopbackRefuseToStart) {
  ServerProcess server("plaintext",
                       {"--listen_address=0.0.0.0:0", TokensFlag({"ada"}, "plaintext_tokens.txt")});
  EXPECT_EQ(server.port(), 0) << "it serves tokens over plaintext on every address";
  const int status = server.exit_status();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << status;
  EXPECT_NE(ReadTextFile(server.log()).find("would cross the network in plaintext"),
            std::string::npos)
      << ReadTextFile(server.log());
}

TEST(Hostile, OnlyLoopbackAddressesByNumberMayServeTokensOverPlaintext) {
  server::ServerOptions o = ::attn::testing::CpuOptions();
  o.tokens_file = ScratchDir() + "tokens_never_read.txt";
  for (const char* address : {"127.0.0.1:50051", "127.3.2.1:0", "[::1]:50051", "localhost:0"}) {
    o.listen_address = address;
    EXPECT_TRUE(server::ValidateServerOptions(o).ok()) << address;
  }
  for (const char* address :
       {"0.0.0.0:50051", "[::]:50051", "10.0.0.7:50051", "127.example.com:50051",
        "127.0.0.1.example.com:0", "[::ffff:10.0.0.1]:0", "attn.local:50051", "128.0.0.1:0"}) {
    o.listen_address = address;
    const absl::Status s = server::ValidateServerOptions(o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << address;
    EXPECT_NE(s.message().find("would cross the network in plaintext"), std::string::npos)
        << address << ": " << s;
  }
}

TEST(Hostile, KvLensAreChargedAsHeldNotAsSent) {
  // 3.5 M lengths of 1: ~3.5 MB on the wire, 14 MB as int32 in the parsed request; a lone
  // participant's share of 24 MiB is 12 MiB.
  ServerProcess server("kv_lens", {"--max_request_mib=6", "--max_host_mib=24"});
  ASSERT_GT(server.port(), 0) << ReadTextFile(server.log());
  auto stub = Connect(server.port());
  const int64_t b = 3500000;
  v1::AttendRequest r = Generated(MakeShape(b, 1, 1, 1));
  for (int64_t i = 0; i < b; ++i) r.add_kv_lens(1);
  ASSERT_LT(r.ByteSizeLong(), size_t{6} << 20);
  grpc::ClientContext ctx;
  v1::AttendResponse resp;
  const grpc::Status s = stub->Attend(&ctx, r, &resp);
  EXPECT_EQ(s.error_code(), grpc::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_NE(s.error_message().find("host memory"), std::string::npos) << s.error_message();
}

TEST(Hostile, AModelInferIsChargedForItsRequestAndTheAttendMadeOfIt) {
  // A lone participant's share: 16 MiB. 7 MiB of tensors: as an Attend 7 MiB held; as a
  // ModelInfer 14 MiB (its request and the Attend converted from it) and two copies of the
  // output.
  ServerProcess server("infer", {"--max_request_mib=8", "--max_host_mib=32"});
  ASSERT_GT(server.port(), 0) << ReadTextFile(server.log());
  const v1::AttendRequest attend = WithTensors(7);
  {
    grpc::ClientContext ctx;
    v1::AttendResponse resp;
    const grpc::Status s = Connect(server.port())->Attend(&ctx, attend, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  inference::ModelInferRequest infer;
  infer.set_model_name("attention");
  const int64_t t = attend.shape().q_len();
  const char* names[] = {"Q", "K", "V"};
  const std::string* data[] = {&attend.tensors().q(), &attend.tensors().k(), &attend.tensors().v()};
  for (int i = 0; i < 3; ++i) {
    auto* in = infer.add_inputs();
    in->set_name(names[i]);
    in->set_datatype("FP32");
    for (int64_t d : {int64_t{1}, t, int64_t{1}, int64_t{256}}) in->add_shape(d);
    *infer.add_raw_input_contents() = *data[i];
  }
  auto kserve = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  inference::ModelInferResponse resp;
  const grpc::Status s = kserve->ModelInfer(&ctx, infer, &resp);
  EXPECT_EQ(s.error_code(), grpc::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_NE(s.error_message().find("host memory"), std::string::npos) << s.error_message();
}

TEST(Hostile, ABenchmarkJobWhoseReaderNeverReadsPausesAndStaysBounded) {
  ServerProcess server("reader", {"--metrics_address=127.0.0.1:0"});
  ASSERT_GT(server.port(), 0) << ReadTextFile(server.log());
  // A reader that takes nothing: its flow-control window stays at 16 KiB, so the server's writes
  // stop completing after a few dozen events.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 16 * 1024);
  auto stub = v1::AttentionService::NewStub(
      grpc::CreateCustomChannel(server.address(), grpc::InsecureChannelCredentials(), args));
  v1::RunBenchmarkRequest job;
  for (int i = 0; i < 1000; ++i) {
    auto* c = job.mutable_cases()->add_cases();
    *c->mutable_shape() = MakeShape(1, 4, 1, 8);
    c->set_dtype(v1::FLOAT32);
    c->set_section(std::string(120, 's'));
  }
  job.mutable_options()->set_warmup(0);
  job.mutable_options()->set_repeats(1);
  grpc::ClientContext ctx;
  auto reader = stub->RunBenchmark(&ctx, job);
  // The client reads nothing for 3 s: a thousand cases of microseconds each would be done.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const std::regex cases(
      "attn_benchmark_cases_total\\{backend=\"[a-z]+\",status=\"OK\"\\} ([0-9]+)");
  ASSERT_GT(server.metrics_port(), 0) << ReadTextFile(server.log());
  const std::string scrape = ::attn::testing::HttpGet(server.metrics_port(), "/metrics");
  int done = 0;
  for (auto it = std::sregex_iterator(scrape.begin(), scrape.end(), cases);
       it != std::sregex_iterator(); ++it) {
    done += std::stoi((*it)[1]);
  }
  std::printf("cases run while the reader read nothing for 3 s: %d of 1000\n", done);
  EXPECT_LT(done, 900) << "the job ran on with nobody reading its events";
  // Reading resumes the job, which then finishes.
  v1::RunBenchmarkEvent e;
  int results = 0;
  while (reader->Read(&e)) results += e.has_result();
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(results, 1000);
}

TEST(Hostile, AFreeTextSectionHasALengthRule) {
  ServerProcess server("section");
  ASSERT_GT(server.port(), 0) << ReadTextFile(server.log());
  v1::RunBenchmarkRequest job;
  auto* c = job.mutable_cases()->add_cases();
  *c->mutable_shape() = MakeShape(1, 16, 1, 16);
  c->set_dtype(v1::FLOAT32);
  c->set_section(std::string(1 << 20, 's'));
  const grpc::Status s = ::attn::testing::JobStatus(*Connect(server.port()), job);
  EXPECT_EQ(s.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("cases[0].section: at most 128 bytes"), std::string::npos)
      << s.error_message().substr(0, 200);
}

TEST(Hostile, ErrorsQuotingWhatAClientSentStayShortInRepliesAndTheLog) {
  ServerProcess server("echo");
  ASSERT_GT(server.port(), 0) << ReadTextFile(server.log());
  auto stub = Connect(server.port());
  const int64_t log_before = FileSize(server.log());
  for (int i = 0; i < 20; ++i) {
    v1::AttendRequest r = Generated(MakeShape(1, 16, 1, 16));
    r.set_backend(std::string(1 << 20, 'b'));
    grpc::ClientContext ctx;
    v1::AttendResponse resp;
    const grpc::Status s = stub->Attend(&ctx, r, &resp);
    EXPECT_EQ(s.error_code(), grpc::INVALID_ARGUMENT);
    EXPECT_LT(s.error_message().size(), 1200u);
  }
  EXPECT_LT(FileSize(server.log()) - log_before, 20 * 2048);
}

// `threads` of participant "flood" send `flood` Attends back to back; after a second, "ada" sends
// `mine` five times. How many of ada's succeeded (the first error otherwise) and whether the flood
// was refused at all.
struct Shared {
  int ok = 0;
  std::string first_error;
  int flood_refused = 0;
};
Shared FloodBesideAnother(int port, int threads, const v1::AttendRequest& flood,
                          const v1::AttendRequest& mine) {
  std::atomic<bool> stop{false};
  std::atomic<int> refused{0};
  std::vector<std::thread> flooders;
  for (int i = 0; i < threads; ++i) {
    flooders.emplace_back([&] {
      auto stub = Connect(port);
      while (!stop) {
        grpc::ClientContext ctx;
        Authorize(ctx, "flood");
        Deadline(ctx, 60);
        v1::AttendResponse resp;
        if (!stub->Attend(&ctx, flood, &resp).ok()) ++refused;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  Shared out;
  auto stub = Connect(port);
  for (int i = 0; i < 5; ++i) {
    grpc::ClientContext ctx;
    Authorize(ctx, "ada");
    Deadline(ctx, 60);
    v1::AttendResponse resp;
    const grpc::Status s = stub->Attend(&ctx, mine, &resp);
    if (s.ok()) {
      ++out.ok;
    } else if (out.first_error.empty()) {
      out.first_error = s.error_message();
    }
  }
  stop = true;
  for (auto& t : flooders) t.join();
  out.flood_refused = refused;
  return out;
}

TEST(Hostile, AParticipantFillingTheQueueLeavesRoomForAnother) {
  // One worker, a queue of 8 and no per-participant queue cap below it: alone, the flooder
  // fills the queue; another participant's call still gets in and runs.
  ServerProcess server("queue",
                       {TokensFlag({"flood", "ada"}, "queue_tokens.txt"), "--queue_depth=8",
                        "--participant_max_queued=8", "--participant_max_inflight=64"});
  ASSERT_GT(server.port(), 0) << ReadTextFile(server.log());
  const Shared r = FloodBesideAnother(server.port(), 24, Generated(MakeShape(1, 512, 4, 64)),
                                      Generated(MakeShape(1, 16, 1, 16)));
  EXPECT_EQ(r.ok, 5) << r.first_error;
  EXPECT_GT(r.flood_refused, 0) << "the flood never filled the queue";
}

TEST(Hostile, AParticipantHoldingTheHostBudgetLeavesRoomForAnother) {
  // 32 MiB of host memory; the flooder's 6 MiB Attends, 8 at once, would hold all of it.
  ServerProcess server(
      "host_share",
      {TokensFlag({"flood", "ada"}, "host_tokens.txt"), "--max_request_mib=8", "--max_host_mib=32",
       "--participant_max_inflight=64", "--participant_max_queued=64", "--queue_depth=64"});
  ASSERT_GT(server.port(), 0) << ReadTextFile(server.log());
  const v1::AttendRequest big = WithTensors(6);
  const Shared r = FloodBesideAnother(server.port(), 8, big, big);
  EXPECT_EQ(r.ok, 5) << r.first_error;
  EXPECT_GT(r.flood_refused, 0) << "the flood never reached its share";
}

}  // namespace
}  // namespace attn::server
