// The server's Prometheus metrics (prefix attn_, base units, bounded labels) and their HTTP
// endpoint. Histograms are aggregatable across replicas (fixed buckets, no summaries).
//
//   attn_request_duration_seconds{rpc,code}      histogram: accepted to finished, per RPC
//   attn_queue_wait_seconds{device}              histogram: submitted to started on a worker
//   attn_device_time_seconds{backend,dtype,causal} histogram: one Attend call on the device
//   attn_requests_total{rpc,code}                counter
//   attn_benchmark_cases_total{backend,status}   counter: benchmark cases by result status
//                                                (every backend x kBenchmarkCaseStatuses from 0)
//   attn_refusals_total{reason}                  counter: requests refused before they ran, by
//                                                the rule (every kRefusalReasons from 0)
//   attn_participant_requests_total{participant,rpc,code}  counters, only with --tokens_file
//   attn_participant_device_seconds_total{participant}     (names from the tokens file)
//   attn_queue_depth{device}                     gauge: tasks waiting
//   attn_arena_used_bytes{device}, attn_arena_capacity_bytes{device}  gauges
//   attn_inflight_requests                       gauge: accepted and not finished
//   attn_serving                                 gauge: 1 when health is SERVING
//   attn_build_info{version,cuda_runtime,cudnn}, attn_device_info{device,name,compute_capability}
//   attn_tokens_file_last_good_load_timestamp_seconds  gauge, only with --tokens_file: unix time
//                                                the file was last read keeping every rule
//   attn_tokens_file_load_failures_total         counter, only with --tokens_file (auth.h)
//
// The endpoint (metrics_http.h) answers GET /metrics on a thread of its own.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/counter.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace attn::server {

class DeviceWorkers;
class MetricsHttp;
class TokenRegistry;

// The status labels attn_benchmark_cases_total is pre-registered with, per backend: a case's
// result (absl code name, as in CaseResult.status).
inline constexpr const char* kBenchmarkCaseStatuses[] = {"OK",
                                                         "FAILED_PRECONDITION",
                                                         "RESOURCE_EXHAUSTED",
                                                         "INVALID_ARGUMENT",
                                                         "DEADLINE_EXCEEDED",
                                                         "CANCELLED",
                                                         "INTERNAL"};

// Why a request was refused before it ran: attn_refusals_total's reason label.
inline constexpr const char* kRefusalReasons[] = {"unauthenticated",
                                                  "malformed_body",
                                                  "permission",
                                                  "call_cost",
                                                  "job_cost",
                                                  "host_memory",
                                                  "device_memory",
                                                  "queue_full",
                                                  "participant_queued",
                                                  "participant_queue_share",
                                                  "participant_inflight",
                                                  "participant_jobs",
                                                  "participant_device_time"};

class Metrics {
 public:
  // `devices` are sampled at scrape time for the queue and arena gauges; they must outlive this.
  Metrics(const std::vector<DeviceWorkers*>& devices, const std::string& version,
          const std::string& cuda_runtime, const std::string& cudnn);

  ~Metrics();

  // Serves GET /metrics over HTTP on `address` ("host:port", IPv4; port 0 picks one) from a
  // thread of its own. Returns the bound port.
  absl::StatusOr<int> Expose(const std::string& address);

  // Exports the tokens file's load state (the attn_tokens_file_* families) from `tokens`, read
  // at each scrape; it must outlive this.
  void ObserveTokensFile(const TokenRegistry* tokens);

  void Request(const std::string& rpc, const std::string& code, double seconds);
  void QueueWait(int device, double seconds);
  void DeviceTime(const std::string& backend, const std::string& dtype, bool causal,
                  double seconds);
  void BenchmarkCase(const std::string& backend, const std::string& status);
  void Refusal(const std::string& reason);
  // Per participant (tokens only): the participant's requests and the seconds its tasks held
  // a device worker.
  void ParticipantRequest(const std::string& participant, const std::string& rpc,
                          const std::string& code);
  void ParticipantDeviceSeconds(const std::string& participant, double seconds);

  std::atomic<int> inflight{0};
  std::atomic<bool> serving{false};

  // The text a scrape returns, for tests and logs.
  std::string Render() const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<prometheus::Collectable> live_;
  std::atomic<const TokenRegistry*> tokens_{nullptr};
  std::unique_ptr<MetricsHttp> http_;
  prometheus::Family<prometheus::Histogram>* request_seconds_;
  prometheus::Family<prometheus::Histogram>* queue_seconds_;
  prometheus::Family<prometheus::Histogram>* device_seconds_;
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Family<prometheus::Counter>* cases_;
  prometheus::Family<prometheus::Counter>* refusals_;
  prometheus::Family<prometheus::Counter>* participant_requests_;
  prometheus::Family<prometheus::Counter>* participant_device_seconds_;
};

}  // namespace attn::server
