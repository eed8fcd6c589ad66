// Helpers of the server's end-to-end tests: options for an in-process server on the cpu
// backend, a stub on a port, request shapes, a series' value in a metrics scrape.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <string>

#include "attention/v1/attention.grpc.pb.h"
#include "server/server.h"

namespace attn::testing {

// An in-process server on the cpu backend, on loopback ports the kernel picks.
inline server::ServerOptions CpuOptions() {
  server::ServerOptions o;
  o.listen_address = "127.0.0.1:0";
  o.metrics_address = "127.0.0.1:0";
  o.devices = "cpu";
  o.arena_bytes = int64_t{256} << 20;
  o.limits.max_request_bytes = int64_t{8} << 20;
  return o;
}

inline std::unique_ptr<attention::v1::AttentionService::Stub> Connect(int port) {
  return attention::v1::AttentionService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
}

// Runs a benchmark job to its end, ignoring its events: the status it finished with.
inline grpc::Status JobStatus(attention::v1::AttentionService::Stub& stub,
                              const attention::v1::RunBenchmarkRequest& request) {
  grpc::ClientContext ctx;
  auto reader = stub.RunBenchmark(&ctx, request);
  for (attention::v1::RunBenchmarkEvent e; reader->Read(&e);) {
  }
  return reader->Finish();
}

inline attention::v1::Shape MakeShape(int64_t b, int64_t t, int64_t n, int64_t h, int64_t k = 0) {
  attention::v1::Shape s;
  s.set_batch(b);
  s.set_q_len(t);
  s.set_num_heads(n);
  s.set_head_dim(h);
  s.set_num_kv_heads(k);
  return s;
}

// The value of the series `series` (name and labels, as the exposition writes them) in the
// Prometheus text `exposition`, or -1 when it is not there.
inline double SeriesValue(const std::string& exposition, const std::string& series) {
  const size_t at = exposition.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::stod(exposition.substr(at + series.size() + 2));
}

}  // namespace attn::testing
