// What the server answers before any handler runs: a call's path turned into its metrics label,
// and a body that is not a protobuf of the method's request type (INVALID_ARGUMENT naming the
// type, logged, counted in attn_requests_total{rpc,code} and attn_refusals_total{reason}; the
// server serves on). The end-to-end tests talk to a real attn-server process.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "attention/v1/attention.grpc.pb.h"
#include "bench/loopback.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "server/served_methods.h"
#include "server/server_helpers.h"
#include "server/tokens_file_helpers.h"
#include "server_process.h"

namespace attn::server {
namespace {
namespace v1 = attention::v1;
using ::attn::testing::Connect;
using ::attn::testing::ReadTextFile;
using ::attn::testing::ServerProcess;

// A JSON body, as a client that does not speak protobuf sends: no protobuf of any type.
const char kJsonBody[] = R"({"shape": {"batch": 1, "q_len": 16}, "dtype": "FLOAT32"})";

// A method of a service the server serves: its path, request type and metrics label.
struct Method {
  std::string path, request_type, label;
};

// Every method of attention.v1.AttentionService and inference.GRPCInferenceService.
std::vector<Method> ServiceMethods() {
  std::vector<Method> out;
  for (const char* name : {v1::AttentionService::service_full_name(),
                           inference::GRPCInferenceService::service_full_name()}) {
    const auto* service =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(name);
    for (int i = 0; service != nullptr && i < service->method_count(); ++i) {
      const auto* m = service->method(i);
      out.push_back(
          {"/" + service->full_name() + "/" + m->name(), m->input_type()->full_name(), m->name()});
    }
  }
  return out;
}

// The value of `series` in a scrape of the server's /metrics, or -1 when it is not there.
double Scraped(const ServerProcess& server, const std::string& series) {
  return ::attn::testing::SeriesValue(::attn::testing::HttpGet(server.metrics_port(), "/metrics"),
                                      series);
}

// `body` as the message of a unary call of `path`, with `token` as its bearer token if given.
grpc::Status RawCall(const ServerProcess& server, const std::string& path, const std::string& body,
                     const std::string& token = "") {
  grpc::GenericStub stub(grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  return ::attn::loopback::RawUnaryCall(stub, ctx, path, body);
}

// The server still answers: an Attend runs.
void ExpectServing(const ServerProcess& server, const std::string& token = "") {
  v1::AttendRequest r;
  *r.mutable_shape() = ::attn::testing::MakeShape(1, 16, 1, 16);
  r.set_dtype(v1::FLOAT32);
  r.mutable_generated()->set_seed(1);
  r.set_omit_output(true);
  grpc::ClientContext ctx;
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  v1::AttendResponse resp;
  const grpc::Status s = Connect(server.port())->Attend(&ctx, r, &resp);
  EXPECT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
}

TEST(ServedMethods, EveryMethodOfTheServedServicesHasItsLabelAndOtherPathsAreUnknown) {
  const std::vector<Method> methods = ServiceMethods();
  EXPECT_EQ(methods.size(), 10u);  // 3 of attention.v1, 7 of KServe's
  for (const Method& m : methods) {
    EXPECT_EQ(RpcLabel(m.path), m.label) << m.path;
    ASSERT_NE(FindServedMethod(m.path), nullptr) << m.path;
    EXPECT_EQ(FindServedMethod(m.path)->input_type()->full_name(), m.request_type);
  }
  EXPECT_EQ(RpcLabel("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"),
            "ServerReflectionInfo");
  for (const char* path :
       {"", "/", "Attend", "/attention.v1.AttentionService/", "/attention.v1.AttentionService/Nope",
        "/no.such.Service/Attend", "/grpc.health.v1.Health/Check",
        "/attention.v1.AttentionService/Attend/x"}) {
    EXPECT_EQ(RpcLabel(path), "unknown") << path;
    EXPECT_EQ(FindServedMethod(path), nullptr) << path;
  }
}

TEST(RequestBody, NotAProtobufOfTheMethodsTypeIsInvalidArgumentNamingTheType) {
  ServerProcess server("not_protobuf", {"--metrics_address=127.0.0.1:0"});
  ASSERT_GT(server.port(), 0) << ReadTextFile(server.log());
  const std::vector<Method> methods = ServiceMethods();
  ASSERT_EQ(methods.size(), 10u);
  for (const Method& m : methods) {
    const auto* type =
        google::protobuf::DescriptorPool::generated_pool()->FindMessageTypeByName(m.request_type);
    ASSERT_NE(type, nullptr) << m.request_type;
    std::unique_ptr<google::protobuf::Message> parsed(
        google::protobuf::MessageFactory::generated_factory()->GetPrototype(type)->New());
    ASSERT_FALSE(parsed->ParseFromString(kJsonBody)) << "parses as " << m.request_type;

    // Our answer, where gRPC's handler alone would give UNIMPLEMENTED with no message.
    const grpc::Status s = RawCall(server, m.path, kJsonBody);
    EXPECT_EQ(s.error_code(), grpc::INVALID_ARGUMENT) << m.path << ": " << s.error_message();
    EXPECT_EQ(s.error_message(), "request body is not a valid " + m.request_type +
                                     ": send a serialized " + m.request_type +
                                     ", as clients generated from attn's proto/ do")
        << m.path;
    EXPECT_EQ(
        Scraped(server, "attn_requests_total{code=\"INVALID_ARGUMENT\",rpc=\"" + m.label + "\"}"),
        1)
        << m.path;
  }
  EXPECT_EQ(Scraped(server, "attn_refusals_total{reason=\"malformed_body\"}"), methods.size());
  const std::string log = ReadTextFile(server.log());
  for (const char* line : {"rpc=Attend code=INVALID_ARGUMENT error=\"request body is not a valid "
                           "attention.v1.AttendRequest",
                           "rpc=ModelInfer code=INVALID_ARGUMENT error=\"request body is not a "
                           "valid inference.ModelInferRequest"}) {
    EXPECT_NE(log.find(line), std::string::npos) << line << " not in\n" << log;
  }
  ExpectServing(server);
  EXPECT_EQ(Scraped(server, "attn_requests_total{code=\"OK\",rpc=\"Attend\"}"), 1);
}

TEST(RequestBody, AFloodOfMalformedBodiesIsCountedWholeAndLoggedInPart) {
  ServerProcess server("malformed_flood", {"--metrics_address=127.0.0.1:0"});
  ASSERT_GT(server.port(), 0) << ReadTextFile(server.log());
  const size_t log_before = ReadTextFile(server.log()).size();
  grpc::GenericStub stub(grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
  const int calls = 300;
  for (int i = 0; i < calls; ++i) {
    grpc::ClientContext ctx;
    const grpc::Status s = ::attn::loopback::RawUnaryCall(
        stub, ctx, "/attention.v1.AttentionService/Attend", kJsonBody);
    ASSERT_EQ(s.error_code(), grpc::INVALID_ARGUMENT) << i << ": " << s.error_message();
  }
  EXPECT_EQ(Scraped(server, "attn_requests_total{code=\"INVALID_ARGUMENT\",rpc=\"Attend\"}"),
            calls);
  EXPECT_EQ(Scraped(server, "attn_refusals_total{reason=\"malformed_body\"}"), calls);
  // A burst of 40 lines, then 20 a second: far fewer than 300 when the calls take a few seconds.
  const std::string log = ReadTextFile(server.log()).substr(log_before);
  size_t lines = 0;
  for (size_t at = 0; (at = log.find("code=INVALID_ARGUMENT", at)) != std::string::npos; ++at) {
    ++lines;
  }
  std::printf("%d malformed bodies: %zu log lines\n", calls, lines);
  EXPECT_GE(lines, 40u);
  EXPECT_LT(lines, 200u);
  ExpectServing(server);
}

TEST(RequestBody, WithTokensTheGateRefusesFirstThenAParticipantsMalformedBodyIsTheirs) {
  const std::string tokens = ::attn::testing::ScratchDir() + "body_tokens.txt";
  ::attn::testing::WriteTokensFile(tokens, ::attn::testing::TokensLine("ada", "ada-token"));
  ServerProcess server("body_tokens", {"--metrics_address=127.0.0.1:0", "--tokens_file=" + tokens});
  ASSERT_GT(server.port(), 0) << ReadTextFile(server.log());
  const std::string attend = "/attention.v1.AttentionService/Attend";
  EXPECT_EQ(RawCall(server, attend, kJsonBody).error_code(), grpc::UNAUTHENTICATED);
  const grpc::Status s = RawCall(server, attend, kJsonBody, "ada-token");
  EXPECT_EQ(s.error_code(), grpc::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("not a valid attention.v1.AttendRequest"), std::string::npos)
      << s.error_message();
  EXPECT_EQ(Scraped(server, "attn_refusals_total{reason=\"unauthenticated\"}"), 1);
  EXPECT_EQ(Scraped(server, "attn_refusals_total{reason=\"malformed_body\"}"), 1);
  // Counted and logged as ada's: the gate named the participant before the body was read.
  EXPECT_EQ(Scraped(server,
                    "attn_participant_requests_total{code=\"INVALID_ARGUMENT\","
                    "participant=\"ada\",rpc=\"Attend\"}"),
            1);
  const std::string log = ReadTextFile(server.log());
  const size_t at = log.find("not a valid attention.v1.AttendRequest");
  ASSERT_NE(at, std::string::npos) << log;
  const size_t begin = log.rfind('\n', at) + 1;  // npos + 1 == 0: the first line
  const std::string line = log.substr(begin, log.find('\n', at) - begin);
  EXPECT_NE(line.find("participant=ada"), std::string::npos) << line;
  ExpectServing(server, "ada-token");
}

}  // namespace
}  // namespace attn::server
