// attn-abuse: one participant running every attack at once against an attn-server on loopback,
// for the soak (bench/soak.sh): the server must keep serving the others, its memory and log
// bounded. Prints what each attack got back, by status code.
//
//   attn-abuse --target=127.0.0.1:50051 --token=T --metrics_port=9464 --seconds=120
//
// Attacks (a thread or a few each, until --seconds pass): huge and odd client_ids; large bodies
// without a token; every RPC and reflection without a token; Attends over the participant's
// quotas; kv_lens of millions of values; ModelInfer near the size limit; benchmark jobs whose
// reader never reads; jobs cancelled after their first event; bytes that are not protobuf; idle
// and slow-loris connections to /metrics.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "attention/v1/attention.grpc.pb.h"
#include "bench/loopback.h"
#include "engine/tools/flags_help.h"
#include "inference/grpc_service.grpc.pb.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051", "attn-server address (plaintext, loopback)");
ABSL_FLAG(std::string, token, "", "the abuser's own valid token (its quotas are what it abuses)");
ABSL_FLAG(int, metrics_port, 0, "the server's /metrics port; 0: no attacks on it");
ABSL_FLAG(double, seconds, 60, "how long to attack (SIGINT or SIGTERM ends it sooner)");
ABSL_FLAG(int64_t, max_request_mib, 64, "the server's --max_request_mib (bodies are sized to it)");

namespace v1 = attention::v1;
using ::attn::loopback::ConnectTcp;
using ::attn::loopback::RawUnaryCall;
using Clock = std::chrono::steady_clock;

namespace {

std::atomic<bool> interrupted{false};

// Status codes seen per attack.
class Tally {
 public:
  void Add(const std::string& attack, grpc::StatusCode code) {
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_[attack][code];
  }
  void Print() const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [attack, codes] : counts_) {
      std::printf("  %-28s", attack.c_str());
      for (const auto& [code, n] : codes)
        std::printf(" code %d x%lld", code, static_cast<long long>(n));
      std::printf("\n");
    }
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::map<grpc::StatusCode, int64_t>> counts_;
};

std::shared_ptr<grpc::Channel> Channel() {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
  return grpc::CreateCustomChannel(absl::GetFlag(FLAGS_target), grpc::InsecureChannelCredentials(),
                                   args);
}

void Authorize(grpc::ClientContext& ctx) {
  ctx.AddMetadata("authorization", "Bearer " + absl::GetFlag(FLAGS_token));
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
}

v1::AttendRequest Generated(int64_t b, int64_t t, int64_t n, int64_t h) {
  v1::AttendRequest r;
  r.mutable_shape()->set_batch(b);
  r.mutable_shape()->set_q_len(t);
  r.mutable_shape()->set_num_heads(n);
  r.mutable_shape()->set_head_dim(h);
  r.set_dtype(v1::FLOAT32);
  r.mutable_generated()->set_seed(1);
  r.set_omit_output(true);
  return r;
}

// q, k and v of about `bytes` in all (float32 B1 S=T N1 H256).
v1::AttendRequest WithTensors(int64_t bytes) {
  const int64_t t = bytes / (3 * 256 * 4);
  v1::AttendRequest r = Generated(1, t, 1, 256);
  r.clear_generated();
  for (std::string* s : {r.mutable_tensors()->mutable_q(), r.mutable_tensors()->mutable_k(),
                         r.mutable_tensors()->mutable_v()}) {
    s->assign(static_cast<size_t>(t * 256 * 4), '\0');
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  attn::HandleHelpFlag(argc, argv,
                       "attn-abuse: every attack at once against an attn-server on loopback.");
  absl::ParseCommandLine(argc, argv);
  const auto started = Clock::now();
  const auto until =
      started + std::chrono::milliseconds(static_cast<int64_t>(absl::GetFlag(FLAGS_seconds) * 1e3));
  for (int sig : {SIGINT, SIGTERM}) signal(sig, [](int) { interrupted = true; });
  const auto going = [&] { return !interrupted && Clock::now() < until; };
  const int64_t limit = absl::GetFlag(FLAGS_max_request_mib) << 20;
  Tally tally;
  std::vector<std::thread> threads;
  const auto spawn = [&](int copies, const std::function<void()>& attack) {
    for (int i = 0; i < copies; ++i) threads.emplace_back(attack);
  };

  // Huge client_ids of printable junk, with a valid token.
  spawn(1, [&] {
    auto stub = v1::AttentionService::NewStub(Channel());
    std::mt19937 rng(1);
    while (going()) {
      v1::AttendRequest r = Generated(1, 16, 1, 16);
      std::string id(size_t{1} << 20, 'x');
      for (char& c : id) c = static_cast<char>(0x20 + rng() % 0x5f);  // printable, odd ones too
      r.set_client_id(id);
      grpc::ClientContext ctx;
      Authorize(ctx);
      v1::AttendResponse resp;
      tally.Add("client_id 1 MiB", stub->Attend(&ctx, r, &resp).error_code());
    }
  });
  // Bodies near the limit without a token.
  const v1::AttendRequest big = WithTensors(limit - (1 << 20));
  spawn(4, [&] {
    auto stub = v1::AttentionService::NewStub(Channel());
    while (going()) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      v1::AttendResponse resp;
      tally.Add("no token, large body", stub->Attend(&ctx, big, &resp).error_code());
    }
  });
  // Every RPC, reflection included, and bytes that are not protobuf, without a token.
  spawn(1, [&] {
    grpc::GenericStub generic(Channel());
    const char* methods[] = {"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                             "/attention.v1.AttentionService/GetServerInfo",
                             "/attention.v1.AttentionService/RunBenchmark",
                             "/inference.GRPCInferenceService/ModelInfer"};
    while (going()) {
      for (const char* method : methods) {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        tally.Add("no token, any RPC",
                  RawUnaryCall(generic, ctx, method, "\xff\xff\xff not protobuf").error_code());
      }
    }
  });
  // Not protobuf, with a token.
  spawn(1, [&] {
    grpc::GenericStub generic(Channel());
    while (going()) {
      grpc::ClientContext ctx;
      Authorize(ctx);
      tally.Add("malformed protobuf",
                RawUnaryCall(generic, ctx, "/attention.v1.AttentionService/Attend",
                             "\x0a\xff\xff\xff\xff\x0f garbage")
                    .error_code());
    }
  });
  // Attends over the participant's quotas: many at once, each a few ms of work.
  spawn(24, [&] {
    auto stub = v1::AttentionService::NewStub(Channel());
    const v1::AttendRequest r = Generated(1, 256, 4, 64);
    while (going()) {
      grpc::ClientContext ctx;
      Authorize(ctx);
      v1::AttendResponse resp;
      tally.Add("flood of Attends", stub->Attend(&ctx, r, &resp).error_code());
    }
  });
  // kv_lens of millions of values, a few bytes each on the wire.
  spawn(1, [&] {
    auto stub = v1::AttentionService::NewStub(Channel());
    const int64_t b = std::min<int64_t>(limit / 2, 8 << 20);
    v1::AttendRequest r = Generated(b, 1, 1, 1);
    for (int64_t i = 0; i < b; ++i) r.add_kv_lens(1);
    while (going()) {
      grpc::ClientContext ctx;
      Authorize(ctx);
      v1::AttendResponse resp;
      tally.Add("kv_lens of millions", stub->Attend(&ctx, r, &resp).error_code());
    }
  });
  // ModelInfer near the size limit (the server holds its request and the Attend made of it).
  spawn(2, [&] {
    auto stub = inference::GRPCInferenceService::NewStub(Channel());
    const v1::AttendRequest a = WithTensors(limit - (1 << 20));
    inference::ModelInferRequest infer;
    infer.set_model_name("attention");
    const char* names[] = {"Q", "K", "V"};
    const std::string* data[] = {&a.tensors().q(), &a.tensors().k(), &a.tensors().v()};
    for (int i = 0; i < 3; ++i) {
      auto* in = infer.add_inputs();
      in->set_name(names[i]);
      in->set_datatype("FP32");
      for (int64_t d : {int64_t{1}, a.shape().q_len(), int64_t{1}, int64_t{256}}) in->add_shape(d);
      *infer.add_raw_input_contents() = *data[i];
    }
    while (going()) {
      grpc::ClientContext ctx;
      Authorize(ctx);
      inference::ModelInferResponse resp;
      tally.Add("ModelInfer near the limit", stub->ModelInfer(&ctx, infer, &resp).error_code());
    }
  });
  // Benchmark jobs whose reader never reads (held 20 s, then cancelled), and jobs cancelled
  // after their first event.
  spawn(2, [&] {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 16 * 1024);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto stub = v1::AttentionService::NewStub(grpc::CreateCustomChannel(
        absl::GetFlag(FLAGS_target), grpc::InsecureChannelCredentials(), args));
    v1::RunBenchmarkRequest job;
    for (int i = 0; i < 1000; ++i) {
      auto* c = job.mutable_cases()->add_cases();
      c->mutable_shape()->set_batch(1);
      c->mutable_shape()->set_q_len(4);
      c->mutable_shape()->set_num_heads(1);
      c->mutable_shape()->set_head_dim(8);
      c->set_dtype(v1::FLOAT32);
      c->set_section(std::string(128, 's'));
    }
    job.mutable_options()->set_warmup(0);
    job.mutable_options()->set_repeats(1);
    while (going()) {
      grpc::ClientContext ctx;
      Authorize(ctx);
      auto reader = stub->RunBenchmark(&ctx, job);
      for (int i = 0; i < 200 && going(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      ctx.TryCancel();
      v1::RunBenchmarkEvent e;
      while (reader->Read(&e)) {
      }
      tally.Add("job never read", reader->Finish().error_code());
    }
  });
  spawn(1, [&] {
    auto stub = v1::AttentionService::NewStub(Channel());
    v1::RunBenchmarkRequest job;
    job.set_suite("codelab");
    while (going()) {
      grpc::ClientContext ctx;
      Authorize(ctx);
      auto reader = stub->RunBenchmark(&ctx, job);
      v1::RunBenchmarkEvent e;
      reader->Read(&e);
      ctx.TryCancel();
      while (reader->Read(&e)) {
      }
      tally.Add("job cancelled at once", reader->Finish().error_code());
    }
  });
  // Idle and slow-loris connections to /metrics.
  if (const int port = absl::GetFlag(FLAGS_metrics_port); port > 0) {
    spawn(1, [&, port] {
      std::vector<int> held;
      while (going()) {
        for (int fd : held) close(fd);
        held.clear();
        for (int i = 0; i < 12; ++i) {
          const int fd = ConnectTcp(port);
          if (fd < 0) continue;
          if (i % 2 == 0) send(fd, "GET /metrics HTTP/1.1\r\nX-Slow: ", 31, MSG_NOSIGNAL);
          held.push_back(fd);
        }
        for (int i = 0; i < 10 && going(); ++i) {
          for (size_t j = 0; j < held.size(); j += 2) send(held[j], "a", 1, MSG_NOSIGNAL);
          std::this_thread::sleep_for(std::chrono::milliseconds(500));
        }
        tally.Add("idle and slow /metrics", grpc::StatusCode::OK);
      }
      for (int fd : held) close(fd);
    });
  }
  for (auto& t : threads) t.join();
  std::printf("attn-abuse: every attack for %.0f s; status codes seen:\n",
              std::chrono::duration<double>(Clock::now() - started).count());
  tally.Print();
  return 0;
}
