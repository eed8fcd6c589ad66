#include "server/metrics.h"

#include "absl/strings/str_cat.h"
#include "attn/registry.h"
#include "prometheus/gauge.h"
#include "prometheus/text_serializer.h"
#include "server/auth.h"
#include "server/metrics_http.h"
#include "server/scheduler.h"

namespace attn::server {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;

// Latency buckets from 50 µs (a small Attend's device time) to 10 min (a long benchmark job).
const prometheus::Histogram::BucketBoundaries& SecondsBuckets() {
  static const prometheus::Histogram::BucketBoundaries b = {
      5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1,
      0.25, 0.5,  1,      2.5,  5,    10,     30,   60,   120,    300,  600};
  return b;
}

// Metrics read when scraped: queue depth and arena bytes per device, in-flight, serving, and the
// tokens file's load state once a registry is observed.
class LiveMetrics : public prometheus::Collectable {
 public:
  LiveMetrics(std::vector<DeviceWorkers*> devices, const Metrics* metrics,
              const std::atomic<const TokenRegistry*>* tokens)
      : devices_(std::move(devices)), metrics_(metrics), tokens_(tokens) {}

  std::vector<MetricFamily> Collect() const override {
    auto family = [](const char* name, const char* help,
                     prometheus::MetricType type = prometheus::MetricType::Gauge) {
      MetricFamily f;
      f.name = name;
      f.help = help;
      f.type = type;
      return f;
    };
    auto add = [](MetricFamily& f, std::vector<ClientMetric::Label> labels, double value) {
      ClientMetric m;
      m.label = std::move(labels);
      (f.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value) = value;
      f.metric.push_back(std::move(m));
    };
    MetricFamily depth = family("attn_queue_depth", "Tasks waiting for a worker, per device.");
    MetricFamily used = family("attn_arena_used_bytes", "Device arena bytes in use, per device.");
    MetricFamily capacity =
        family("attn_arena_capacity_bytes", "Device arena bytes held since start-up, per device.");
    for (const DeviceWorkers* d : devices_) {
      const std::string device = absl::StrCat(d->index());
      add(depth, {{"device", device}}, d->waiting());
      add(used, {{"device", device}}, static_cast<double>(d->arena_in_use()));
      add(capacity, {{"device", device}}, static_cast<double>(d->arena_capacity()) * d->workers());
    }
    MetricFamily inflight = family("attn_inflight_requests", "Requests accepted and not finished.");
    add(inflight, {}, metrics_->inflight.load());
    MetricFamily serving = family("attn_serving", "1 when the health status is SERVING, else 0.");
    add(serving, {}, metrics_->serving.load() ? 1 : 0);
    std::vector<MetricFamily> out = {depth, used, capacity, inflight, serving};
    if (const TokenRegistry* tokens = tokens_->load(); tokens != nullptr) {
      MetricFamily good = family("attn_tokens_file_last_good_load_timestamp_seconds",
                                 "Unix time of the last read of the tokens file that found "
                                 "every line keeping the rules (it is read every few seconds).");
      add(good, {}, tokens->last_good_load_unix());
      MetricFamily failures = family(
          "attn_tokens_file_load_failures_total",
          "Reads of the tokens file that failed: each new unreadable or wrong-mode state, each "
          "changed text with a line that breaks a rule.",
          prometheus::MetricType::Counter);
      add(failures, {}, static_cast<double>(tokens->load_failures()));
      out.push_back(std::move(good));
      out.push_back(std::move(failures));
    }
    return out;
  }

 private:
  std::vector<DeviceWorkers*> devices_;
  const Metrics* metrics_;
  const std::atomic<const TokenRegistry*>* tokens_;
};

}  // namespace

Metrics::Metrics(const std::vector<DeviceWorkers*>& devices, const std::string& version,
                 const std::string& cuda_runtime, const std::string& cudnn)
    : registry_(std::make_shared<prometheus::Registry>()) {
  request_seconds_ =
      &prometheus::BuildHistogram()
           .Name("attn_request_duration_seconds")
           .Help("Time from accepting an RPC to finishing it, by RPC and status code.")
           .Register(*registry_);
  queue_seconds_ = &prometheus::BuildHistogram()
                        .Name("attn_queue_wait_seconds")
                        .Help("Time a task waited for a worker, per device.")
                        .Register(*registry_);
  device_seconds_ = &prometheus::BuildHistogram()
                         .Name("attn_device_time_seconds")
                         .Help("Device time of one Attend call, by backend, dtype and causal.")
                         .Register(*registry_);
  requests_ = &prometheus::BuildCounter()
                   .Name("attn_requests_total")
                   .Help("RPCs finished, by RPC and status code.")
                   .Register(*registry_);
  cases_ = &prometheus::BuildCounter()
                .Name("attn_benchmark_cases_total")
                .Help("Benchmark cases finished, by backend and result status.")
                .Register(*registry_);
  // Every backend with the statuses a case ends with, at 0 from start-up, so that rates and
  // dashboards see the series before the first benchmark (and the first one counts as +1).
  for (const auto& backend : BackendRegistry::Default().backends()) {
    for (const char* status : kBenchmarkCaseStatuses) {
      cases_->Add({{"backend", backend->name()}, {"status", status}});
    }
  }
  refusals_ = &prometheus::BuildCounter()
                   .Name("attn_refusals_total")
                   .Help("Requests refused before they ran, by the rule that refused them.")
                   .Register(*registry_);
  for (const char* reason : kRefusalReasons) refusals_->Add({{"reason", reason}});
  participant_requests_ =
      &prometheus::BuildCounter()
           .Name("attn_participant_requests_total")
           .Help("RPCs finished per participant of the tokens file, by RPC and code.")
           .Register(*registry_);
  participant_device_seconds_ = &prometheus::BuildCounter()
                                     .Name("attn_participant_device_seconds_total")
                                     .Help("Seconds a participant's tasks held a device worker.")
                                     .Register(*registry_);
  auto& build = prometheus::BuildGauge()
                    .Name("attn_build_info")
                    .Help("Always 1; the labels describe the build.")
                    .Register(*registry_);
  build.Add({{"version", version}, {"cuda_runtime", cuda_runtime}, {"cudnn", cudnn}}).Set(1);
  auto& device_info = prometheus::BuildGauge()
                          .Name("attn_device_info")
                          .Help("Always 1; one series per device the server owns.")
                          .Register(*registry_);
  for (const DeviceWorkers* d : devices) {
    device_info
        .Add({{"device", absl::StrCat(d->index())},
              {"name", d->info().name},
              {"compute_capability", absl::StrCat(d->info().ComputeCapability())}})
        .Set(1);
  }
  live_ = std::make_shared<LiveMetrics>(devices, this, &tokens_);
}

absl::StatusOr<int> Metrics::Expose(const std::string& address) {
  auto http = MetricsHttp::Start(address, [this] { return Render(); });
  if (!http.ok()) return http.status();
  http_ = *std::move(http);
  return http_->port();
}

void Metrics::ObserveTokensFile(const TokenRegistry* tokens) { tokens_ = tokens; }

// The endpoint goes first: a scrape in progress must not see the members it renders go.
Metrics::~Metrics() { http_.reset(); }

void Metrics::Request(const std::string& rpc, const std::string& code, double seconds) {
  request_seconds_->Add({{"rpc", rpc}, {"code", code}}, SecondsBuckets()).Observe(seconds);
  requests_->Add({{"rpc", rpc}, {"code", code}}).Increment();
}

void Metrics::QueueWait(int device, double seconds) {
  queue_seconds_->Add({{"device", absl::StrCat(device)}}, SecondsBuckets()).Observe(seconds);
}

void Metrics::DeviceTime(const std::string& backend, const std::string& dtype, bool causal,
                         double seconds) {
  device_seconds_
      ->Add({{"backend", backend}, {"dtype", dtype}, {"causal", causal ? "true" : "false"}},
            SecondsBuckets())
      .Observe(seconds);
}

void Metrics::BenchmarkCase(const std::string& backend, const std::string& status) {
  cases_->Add({{"backend", backend.empty() ? "none" : backend}, {"status", status}}).Increment();
}

void Metrics::Refusal(const std::string& reason) {
  refusals_->Add({{"reason", reason}}).Increment();
}

void Metrics::ParticipantRequest(const std::string& participant, const std::string& rpc,
                                 const std::string& code) {
  participant_requests_->Add({{"participant", participant}, {"rpc", rpc}, {"code", code}})
      .Increment();
}

void Metrics::ParticipantDeviceSeconds(const std::string& participant, double seconds) {
  participant_device_seconds_->Add({{"participant", participant}}).Increment(seconds);
}

std::string Metrics::Render() const {
  auto families = registry_->Collect();
  auto live = live_->Collect();
  families.insert(families.end(), live.begin(), live.end());
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace attn::server
