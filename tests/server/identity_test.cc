// Issue 20 end to end on the cpu backend: bearer tokens (none or unknown -> UNAUTHENTICATED on
// every RPC but health), roles (a participant's admin-only job -> PERMISSION_DENIED), the tokens
// file re-read when it changes (line by line: a bad line grants nothing), per-participant quotas,
// the request id in trailing metadata, TLS with a test CA (a plaintext client is refused).
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "attention/v1/attention.grpc.pb.h"
#include "gtest/gtest.h"
#include "server/auth.h"
#include "server/quota.h"
#include "server/server.h"
#include "server/server_helpers.h"
#include "server/tokens_file_helpers.h"
#include "server_process.h"
#include "test_certificates.h"

namespace attn::server {
namespace {
namespace v1 = attention::v1;
using ::attn::testing::CpuOptions;
using ::attn::testing::MakeShape;
using ::attn::testing::ScratchDir;
using ::attn::testing::TokensLine;
using ::attn::testing::WriteTokensFile;

v1::AttendRequest Small() {
  v1::AttendRequest r;
  *r.mutable_shape() = MakeShape(1, 16, 2, 16);
  r.set_dtype(v1::FLOAT32);
  r.mutable_generated()->set_seed(1);
  r.set_omit_output(true);
  return r;
}

class IdentityTest : public ::testing::Test {
 protected:
  void Start(const std::string& tokens_text, ServerOptions o = CpuOptions()) {
    tokens_ = ScratchDir() + "tokens.txt";
    WriteTokensFile(tokens_, tokens_text);
    o.tokens_file = tokens_;
    o.workers_per_device = 2;
    auto s = Server::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
    stub_ = ::attn::testing::Connect(server_->port());
  }
  grpc::Status Attend(const std::string& token, std::string* request_id = nullptr) {
    grpc::ClientContext ctx;
    if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
    v1::AttendResponse resp;
    const grpc::Status s = stub_->Attend(&ctx, Small(), &resp);
    if (request_id != nullptr) {
      const auto& trailing = ctx.GetServerTrailingMetadata();
      const auto it = trailing.find("x-request-id");
      *request_id = it == trailing.end() ? "" : std::string(it->second.data(), it->second.size());
    }
    return s;
  }
  grpc::Status Job(const std::string& token, const std::string& suite) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + token);
    v1::RunBenchmarkRequest job;
    job.set_suite(suite);
    auto reader = stub_->RunBenchmark(&ctx, job);
    v1::RunBenchmarkEvent e;
    const bool started = reader->Read(&e);
    if (started) ctx.TryCancel();  // it was admitted; that is all this needs
    while (reader->Read(&e)) {
    }
    const grpc::Status s = reader->Finish();
    return started ? grpc::Status::OK : s;
  }

  std::string tokens_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<v1::AttentionService::Stub> stub_;
};

TEST_F(IdentityTest, NoOrAnUnknownTokenIsUnauthenticatedOnEveryRpcButHealth) {
  Start(TokensLine("alice", "alice-secret") + TokensLine("root", "root-secret", "admin"));
  for (const std::string& token : {std::string(), std::string("wrong-secret")}) {
    SCOPED_TRACE(token);
    const grpc::Status s = Attend(token);
    EXPECT_EQ(s.error_code(), grpc::UNAUTHENTICATED);
    EXPECT_NE(s.error_message().find(token.empty() ? "no token" : "unknown token"),
              std::string::npos)
        << s.error_message();
    grpc::ClientContext ictx;
    if (!token.empty()) ictx.AddMetadata("authorization", "Bearer " + token);
    v1::ServerInfo info;
    EXPECT_EQ(stub_->GetServerInfo(&ictx, {}, &info).error_code(), grpc::UNAUTHENTICATED);
    grpc::ClientContext jctx;
    if (!token.empty()) jctx.AddMetadata("authorization", "Bearer " + token);
    v1::RunBenchmarkRequest job;
    job.set_suite("codelab");
    auto reader = stub_->RunBenchmark(&jctx, job);
    v1::RunBenchmarkEvent e;
    EXPECT_FALSE(reader->Read(&e));
    EXPECT_EQ(reader->Finish().error_code(), grpc::UNAUTHENTICATED);
  }
  // A token in a malformed header.
  grpc::ClientContext bad;
  bad.AddMetadata("authorization", "alice-secret");
  v1::AttendResponse resp;
  EXPECT_EQ(stub_->Attend(&bad, Small(), &resp).error_code(), grpc::UNAUTHENTICATED);
  // Health needs no token.
  auto health = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                    grpc::InsecureChannelCredentials());
  EXPECT_TRUE(health->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5)));
  // The right token works, and the reply names the log line.
  std::string id;
  ASSERT_TRUE(Attend("alice-secret", &id).ok());
  EXPECT_FALSE(id.empty());
  const std::string metrics = server_->metrics().Render();
  EXPECT_NE(metrics.find("attn_refusals_total{reason=\"unauthenticated\"} 7"), std::string::npos)
      << metrics;
  EXPECT_NE(
      metrics.find(
          "attn_participant_requests_total{code=\"OK\",participant=\"alice\",rpc=\"Attend\"} 1"),
      std::string::npos)
      << metrics;
}

TEST_F(IdentityTest, TheLargeSuiteIsForAdmins) {
  Start(TokensLine("alice", "alice-secret") + TokensLine("root", "root-secret", "admin"));
  const grpc::Status s = Job("alice-secret", "large");
  EXPECT_EQ(s.error_code(), grpc::PERMISSION_DENIED);
  EXPECT_NE(s.error_message().find("alice: the large suite is for admins"), std::string::npos)
      << s.error_message();
  EXPECT_TRUE(Job("root-secret", "large").ok());
  EXPECT_TRUE(Job("alice-secret", "codelab").ok());
}

TEST_F(IdentityTest, AChangedTokensFileTakesEffectLineByLine) {
  Start(TokensLine("alice", "alice-secret"));
  EXPECT_EQ(Attend("bob-secret").error_code(), grpc::UNAUTHENTICATED);
  WriteTokensFile(tokens_, TokensLine("alice", "alice-secret") + TokensLine("bob", "bob-secret"));
  bool bob = false;
  for (int i = 0; i < 100 && !bob; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    bob = Attend("bob-secret").ok();
  }
  EXPECT_TRUE(bob) << "bob's token was not accepted within 5 s of the change";
  // A line that breaks a rule (a plaintext token instead of its hash) grants nothing; the
  // others apply (tests/server/tokens_file_test.cc has the rules).
  WriteTokensFile(tokens_, TokensLine("alice", "alice-secret") + "bob bob-secret\n" +
                               TokensLine("carol", "carol-secret"));
  bool carol = false;
  for (int i = 0; i < 100 && !carol; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    carol = Attend("carol-secret").ok();
  }
  EXPECT_TRUE(carol) << "carol's token was not accepted within 5 s of the change";
  EXPECT_TRUE(Attend("alice-secret").ok());
  EXPECT_EQ(Attend("bob-secret").error_code(), grpc::UNAUTHENTICATED);
}

TEST_F(IdentityTest, AParticipantOverItsInflightLimitIsRefusedNamingIt) {
  ServerOptions o = CpuOptions();
  o.admission.max_call_seconds = 120;
  Start(TokensLine("alice", "alice-secret", "max_inflight=1") + TokensLine("bob", "bob-secret"), o);
  // alice holds her one call (a long one); her second is refused; bob is served.
  grpc::ClientContext long_ctx;
  long_ctx.AddMetadata("authorization", "Bearer alice-secret");
  v1::AttendRequest long_call = Small();
  *long_call.mutable_shape() = MakeShape(1, 8192, 1, 64);
  long_call.set_backend("reference");
  v1::AttendResponse long_resp;
  std::atomic<bool> done{false};
  stub_->async()->Attend(&long_ctx, &long_call, &long_resp, [&](grpc::Status) { done = true; });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const grpc::Status s = Attend("alice-secret");
  EXPECT_EQ(s.error_code(), grpc::RESOURCE_EXHAUSTED);
  EXPECT_NE(
      s.error_message().find("alice: 1 calls in flight; the limit (--participant_max_inflight, or "
                             "max_inflight in the tokens file) is 1"),
      std::string::npos)
      << s.error_message();
  EXPECT_TRUE(Attend("bob-secret").ok());
  long_ctx.TryCancel();
  while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_NE(
      server_->metrics().Render().find("attn_refusals_total{reason=\"participant_inflight\"} 1"),
      std::string::npos);
}

// The binary: the request id a participant gets back names its log line, which names them.
TEST(IdentityProcess, TheRequestIdInTheReplyNamesTheLogLineWithTheParticipant) {
  const std::string path = ScratchDir() + "process_tokens.txt";
  WriteTokensFile(path, TokensLine("alice", "alice-secret"));
  ::attn::testing::ServerProcess server("identity", {"--tokens_file=" + path});
  ASSERT_GT(server.port(), 0) << ::attn::testing::ReadTextFile(server.log());
  auto stub = ::attn::testing::Connect(server.port());
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer alice-secret");
  v1::AttendRequest bad = Small();
  bad.mutable_shape()->set_head_dim(0);  // a failure to report
  v1::AttendResponse resp;
  const grpc::Status s = stub->Attend(&ctx, bad, &resp);
  ASSERT_EQ(s.error_code(), grpc::INVALID_ARGUMENT);
  const auto& trailing = ctx.GetServerTrailingMetadata();
  const auto it = trailing.find("x-request-id");
  ASSERT_NE(it, trailing.end());
  const std::string id(it->second.data(), it->second.size());
  std::string log;
  for (int i = 0; i < 50 && log.find("rpc=Attend") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    log = ::attn::testing::ReadTextFile(server.log());
  }
  EXPECT_TRUE(std::regex_search(
      log,
      std::regex("request id=" + id + " .*rpc=Attend code=INVALID_ARGUMENT.*participant=alice")))
      << "id " << id << " in:\n"
      << log;
}

TEST(ParticipantQuotas, InflightJobsAndDeviceTimeInARollingWindow) {
  ParticipantQuotas quotas(/*window_s=*/0.6);
  ParticipantLimits limits;
  limits.max_inflight = 2;
  limits.max_jobs = 1;
  limits.device_seconds = 1.0;
  auto a = quotas.Begin("alice", limits, /*job=*/true);
  ASSERT_TRUE(a.ok());
  std::string reason;
  auto b = quotas.Begin("alice", limits, /*job=*/true, &reason);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(reason, "participant_jobs");
  auto c = quotas.Begin("alice", limits, /*job=*/false);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(quotas.Begin("alice", limits, false, &reason).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(reason, "participant_inflight");
  EXPECT_TRUE(quotas.Begin("bob", limits, false).ok()) << "another participant is not touched";
  a->Release();
  c->Release();
  quotas.AddDeviceSeconds("alice", 1.2);
  EXPECT_NEAR(quotas.DeviceSecondsInWindow("alice"), 1.2, 1e-9);
  auto over = quotas.Begin("alice", limits, false, &reason);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(reason, "participant_device_time");
  EXPECT_NE(over.status().message().find("held the device for 1.2 s in the last 0.6 s"),
            std::string::npos)
      << over.status();
  std::this_thread::sleep_for(std::chrono::milliseconds(700));  // the window moves on
  EXPECT_EQ(quotas.DeviceSecondsInWindow("alice"), 0);
  EXPECT_TRUE(quotas.Begin("alice", limits, false).ok());
}

TEST(ParticipantQuotas, StateStaysBoundedUnderManyKeysAndCalls) {
  ParticipantQuotas quotas(600);
  ParticipantLimits limits;
  // Client keys without tokens are the caller's choice: 20000 of them, each with device time.
  for (int i = 0; i < 20000; ++i) quotas.AddDeviceSeconds(absl::StrCat("k", i), 0.001);
  EXPECT_LE(quotas.tracked(), 10000u);
  // One key's many calls fold into the window's buckets.
  for (int i = 0; i < 100000; ++i) quotas.AddDeviceSeconds("busy", 1e-6);
  EXPECT_NEAR(quotas.DeviceSecondsInWindow("busy"), 0.1, 1e-9);
}

// --- TLS ---------------------------------------------------------------------------------

std::string Read(const std::string& path) { return ::attn::testing::ReadTextFile(path); }

// A test CA and certificates in a folder of the test's own (openssl CLI; skips without it).
class Tls : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ScratchDir() + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    if (auto why = ::attn::testing::MakeTestCertificates(dir_); !why.empty()) GTEST_SKIP() << why;
  }
  // Server options for TLS with those certificates.
  ServerOptions TlsOptions() const {
    ServerOptions o = CpuOptions();
    o.tls_cert_file = dir_ + "/server.crt";
    o.tls_key_file = dir_ + "/server.key";
    return o;
  }
  std::string dir_;
};

TEST_F(Tls, ARoundTripWithTheCohortCaAndAPlaintextClientRefused) {
  const std::string dir = dir_;
  ServerOptions o = TlsOptions();
  o.health_address = "127.0.0.1:0";
  auto server = Server::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string target = absl::StrCat("localhost:", (*server)->port());
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = Read(dir + "/ca.crt");
  auto stub = v1::AttentionService::NewStub(grpc::CreateChannel(target, grpc::SslCredentials(ssl)));
  grpc::ClientContext ctx;
  v1::AttendResponse resp;
  ASSERT_TRUE(stub->Attend(&ctx, Small(), &resp).ok());
  // Plaintext against the TLS port: refused.
  auto plain = ::attn::testing::Connect((*server)->port());
  grpc::ClientContext pctx;
  pctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  EXPECT_EQ(plain->Attend(&pctx, Small(), &resp).error_code(), grpc::UNAVAILABLE);
  // A client that does not trust the CA: refused.
  grpc::SslCredentialsOptions other;
  other.pem_root_certs = Read(dir + "/client.crt");  // not a CA
  auto untrusting =
      v1::AttentionService::NewStub(grpc::CreateChannel(target, grpc::SslCredentials(other)));
  grpc::ClientContext uctx;
  uctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  EXPECT_EQ(untrusting->Attend(&uctx, Small(), &resp).error_code(), grpc::UNAVAILABLE);
  // The plaintext health port answers Kubernetes' probes.
  EXPECT_GT((*server)->health_port(), 0);
  auto health = grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*server)->health_port()),
                                    grpc::InsecureChannelCredentials());
  EXPECT_TRUE(health->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5)));
}

TEST_F(Tls, ClientCertificatesWhenTheServerAsksForThem) {
  const std::string dir = dir_;
  ServerOptions o = TlsOptions();
  o.tls_client_ca_file = dir + "/ca.crt";
  auto server = Server::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string target = absl::StrCat("localhost:", (*server)->port());
  v1::AttendResponse resp;
  grpc::SslCredentialsOptions without;
  without.pem_root_certs = Read(dir + "/ca.crt");
  grpc::ClientContext a;
  a.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  EXPECT_NE(
      v1::AttentionService::NewStub(grpc::CreateChannel(target, grpc::SslCredentials(without)))
          ->Attend(&a, Small(), &resp)
          .error_code(),
      grpc::OK);
  grpc::SslCredentialsOptions with = without;
  with.pem_private_key = Read(dir + "/client.key");
  with.pem_cert_chain = Read(dir + "/client.crt");
  grpc::ClientContext b;
  EXPECT_TRUE(v1::AttentionService::NewStub(grpc::CreateChannel(target, grpc::SslCredentials(with)))
                  ->Attend(&b, Small(), &resp)
                  .ok());
}

TEST(TlsFlags, BadFilesAreNamedAtStart) {
  ServerOptions o = CpuOptions();
  o.tls_cert_file = ScratchDir() + "missing.crt";
  o.tls_key_file = ScratchDir() + "missing.key";
  auto s = Server::Start(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--tls_cert_file: cannot read a PEM file"), std::string::npos)
      << s.status();
  o.tls_key_file = "";
  EXPECT_NE(Server::Start(o).status().message().find("give both"), std::string::npos);
}

}  // namespace
}  // namespace attn::server
