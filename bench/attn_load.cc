// attn-load: end-to-end Attend latency and throughput against a running attn-server.
//
//   attn-load --target=127.0.0.1:50051 --shape=4,128,8,64 --dtype=bfloat16 --clients=1 --calls=2000
//
// Each client thread has its own channel and sends Attend calls back to back, with q, k, v
// uploaded (--upload, the default) or generated on the server from a seed; it prints p50/p99 of
// the end-to-end time, the server's reported device and total times, and the payload rate.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "attention/v1/attention.grpc.pb.h"
#include "client/connection.h"
#include "engine/tools/flags_help.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051", "attn-server address");
ABSL_FLAG(std::string, shape, "4,128,8,64", "B,T,N,H");
ABSL_FLAG(int, kv_heads, 0, "key/value heads K (GQA/MQA); 0: K = N");
ABSL_FLAG(bool, causal, false, "causal masking");
ABSL_FLAG(std::string, dtype, "bfloat16", "float32, bfloat16 or float16");
ABSL_FLAG(std::string, backend, "auto", "backend name");
ABSL_FLAG(int, clients, 1, "concurrent clients, one channel each");
ABSL_FLAG(int, calls, 1000, "calls per client (after 20 warm-up calls)");
ABSL_FLAG(int, interval_ms, 0,
          "pause between a client's calls (a steady stream rather than back to back), ms");
ABSL_FLAG(bool, upload, true, "send q, k, v bytes (else: generated on the server)");
ABSL_FLAG(bool, omit_output, false, "ask for timings only (no output bytes back)");
ABSL_FLAG(bool, tls, false, "speak TLS, trusting the system's root certificates");
ABSL_FLAG(std::string, tls_ca_file, "", "speak TLS, trusting this CA certificate (PEM)");
ABSL_FLAG(std::string, token, "", "bearer token sent with every call (default: $ATTN_TOKEN)");
ABSL_FLAG(std::string, client_id, "",
          "a label for the calls (the server's fairness key without tokens)");

namespace v1 = attention::v1;

namespace {
double Pct(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5))];
}
}  // namespace

int main(int argc, char** argv) {
  attn::HandleHelpFlag(
      argc, argv,
      "attn-load: end-to-end Attend latency and throughput against a running attn-server.");
  absl::ParseCommandLine(argc, argv);
  std::vector<int64_t> dims;
  for (absl::string_view d : absl::StrSplit(absl::GetFlag(FLAGS_shape), ',')) {
    int64_t x = 0;
    if (!absl::SimpleAtoi(d, &x) || x < 1) {
      std::fprintf(stderr, "attn-load: --shape: expected B,T,N,H positive integers\n");
      return 2;
    }
    dims.push_back(x);
  }
  if (dims.size() != 4) {
    std::fprintf(stderr, "attn-load: --shape: expected 4 values B,T,N,H\n");
    return 2;
  }
  const std::string dt = absl::GetFlag(FLAGS_dtype);
  const v1::DType dtype = dt == "float32"   ? v1::FLOAT32
                          : dt == "float16" ? v1::FLOAT16
                                            : v1::BFLOAT16;
  const int64_t elem = dtype == v1::FLOAT32 ? 4 : 2;
  v1::AttendRequest req;
  req.mutable_shape()->set_batch(dims[0]);
  req.mutable_shape()->set_q_len(dims[1]);
  req.mutable_shape()->set_num_heads(dims[2]);
  req.mutable_shape()->set_head_dim(dims[3]);
  req.mutable_shape()->set_num_kv_heads(absl::GetFlag(FLAGS_kv_heads));
  req.set_causal(absl::GetFlag(FLAGS_causal));
  req.set_dtype(dtype);
  req.set_backend(absl::GetFlag(FLAGS_backend));
  req.set_omit_output(absl::GetFlag(FLAGS_omit_output));
  const int64_t bytes = dims[0] * dims[1] * dims[2] * dims[3] * elem;
  const int64_t kv_heads =
      absl::GetFlag(FLAGS_kv_heads) > 0 ? absl::GetFlag(FLAGS_kv_heads) : dims[2];
  if (absl::GetFlag(FLAGS_upload)) {
    std::string t(static_cast<size_t>(bytes), '\0');
    for (size_t i = 0; i < t.size(); i += 2) t[i + 1] = 0x3c;  // ~1.0 in bf16/fp16 high bytes
    req.mutable_tensors()->set_q(t);
    t.resize(static_cast<size_t>(bytes / dims[2] * kv_heads));
    req.mutable_tensors()->set_k(t);
    req.mutable_tensors()->set_v(t);
  } else {
    req.mutable_generated()->set_seed(1);
  }
  req.set_client_id(absl::GetFlag(FLAGS_client_id));
  // The target, TLS and token as attn-client takes them (client/connection.h).
  auto target = attn::client::ParseTarget(absl::GetFlag(FLAGS_target));
  absl::Status security =
      target.ok()
          ? attn::client::SetSecurity(absl::GetFlag(FLAGS_tls), absl::GetFlag(FLAGS_tls_ca_file),
                                      absl::GetFlag(FLAGS_token), /*insecure_token=*/false,
                                      absl::GetFlag(FLAGS_target), *target)
          : target.status();
  if (!security.ok()) {
    std::fprintf(stderr, "attn-load: %s\n", std::string(security.message()).c_str());
    return 2;
  }
  const int clients = absl::GetFlag(FLAGS_clients), calls = absl::GetFlag(FLAGS_calls);
  const int interval_ms = absl::GetFlag(FLAGS_interval_ms);
  std::vector<std::vector<double>> e2e(clients), device(clients), total(clients);
  std::vector<int> errors(clients, 0);
  std::vector<std::thread> threads;
  const auto t0 = std::chrono::steady_clock::now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      auto stub = v1::AttentionService::NewStub(attn::client::MakeChannel(*target, c + 1));
      for (int i = 0; i < calls + 20; ++i) {
        grpc::ClientContext ctx;
        v1::AttendResponse resp;
        const auto a = std::chrono::steady_clock::now();
        const grpc::Status s = stub->Attend(&ctx, req, &resp);
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
        if (!s.ok()) {
          if (errors[c]++ == 0) std::fprintf(stderr, "attn-load: %s\n", s.error_message().c_str());
          continue;
        }
        if (i < 20) continue;
        e2e[c].push_back(ms);
        device[c].push_back(resp.timings().device_seconds() * 1e3);
        total[c].push_back(resp.timings().total_seconds() * 1e3);
        std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
      }
    });
  }
  for (auto& t : threads) t.join();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<double> all_e2e, all_dev, all_total;
  int errs = 0;
  for (int c = 0; c < clients; ++c) {
    all_e2e.insert(all_e2e.end(), e2e[c].begin(), e2e[c].end());
    all_dev.insert(all_dev.end(), device[c].begin(), device[c].end());
    all_total.insert(all_total.end(), total[c].begin(), total[c].end());
    errs += errors[c];
  }
  const double n = static_cast<double>(all_e2e.size());
  const double kv_bytes = static_cast<double>(bytes / dims[2] * kv_heads);
  const double payload =
      (absl::GetFlag(FLAGS_upload) ? static_cast<double>(bytes) + 2 * kv_bytes : 0) +
      (absl::GetFlag(FLAGS_omit_output) ? 0 : static_cast<double>(bytes));
  std::printf("shape %s K %lld%s %s clients %d calls %.0f errors %d upload %d omit_output %d\n",
              absl::GetFlag(FLAGS_shape).c_str(), static_cast<long long>(kv_heads),
              absl::GetFlag(FLAGS_causal) ? " causal" : "", dt.c_str(), clients, n, errs,
              absl::GetFlag(FLAGS_upload) ? 1 : 0, absl::GetFlag(FLAGS_omit_output) ? 1 : 0);
  std::printf(
      "end-to-end ms: p50 %.4f p99 %.4f | server total ms: p50 %.4f p99 %.4f | device ms: p50 "
      "%.4f\n",
      Pct(all_e2e, 0.5), Pct(all_e2e, 0.99), Pct(all_total, 0.5), Pct(all_total, 0.99),
      Pct(all_dev, 0.5));
  std::printf(
      "server overhead (total - device) p50 %.4f ms; throughput %.1f calls/s, payload %.2f GB/s "
      "(%.1f MiB per call in+out)\n",
      Pct(all_total, 0.5) - Pct(all_dev, 0.5), n / wall, n * payload / wall / 1e9,
      payload / (1 << 20));
  return errs > 0 ? 1 : 0;
}
