// attn-client bench: a benchmark job sent case by case over the channel's replicas.
//
// The server owns the job: a suite as the server expands it (ServerInfo.suite_cases), or the
// axes' cases as a list. Each case is one RunBenchmark call naming the job and that case's index
// in it (case_indices), so the server gives it the index and seed it has in the whole job and
// results do not depend on how the cases were spread. Once the server has admitted the first
// call, as many calls run at once as the target has replicas (--parallel overrides), and the
// round_robin channel spreads them; each result records the replica (the call's peer) and the
// server's hostname. A refusal of the whole job (PERMISSION_DENIED, UNAUTHENTICATED,
// INVALID_ARGUMENT before any case ran) ends the run with that one error. Ctrl-C cancels the
// calls in flight, which cancels their cases on the server.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "attention/v1/attention.grpc.pb.h"
#include "attn/kv_lens.h"
#include "client/commands.h"
#include "client/progress.h"
#include "client/render.h"
#include "proto/convert.h"
#include "proto/status.h"

namespace attn::client {
namespace {

std::atomic<bool> g_interrupted{false};

void OnSigint(int) { g_interrupted.store(true); }

absl::StatusOr<v1::DType> ParseDTypeFlag(const std::string& name) {
  auto d = ParseDType(name);
  if (!d.ok()) return absl::InvalidArgumentError(absl::StrCat("--dtypes: ", d.status().message()));
  return DTypeToProto(*d);
}

// The backend names the server has (its verdicts list every one).
std::set<std::string> ServerBackends(const v1::ServerInfo& info) {
  std::set<std::string> names;
  for (const auto& v : info.backends()) names.insert(v.backend());
  return names;
}

// A job: --suite as the server expands it (its cases, for progress and the report), or the
// axes' cross product as a list.
struct Job {
  v1::RunBenchmarkRequest request;  // the job without case_indices
  std::vector<v1::BenchmarkCase> cases;
};

// The cases of --suite (from the server's ServerInfo.suite_cases) or of the axes' cross product.
// Axis sweeps get one section per combination of the other axes, so each table is a sweep over
// one axis. `seed` (BuildOptions' --seed) draws --kv-lens distributions.
absl::StatusOr<Job> BuildJob(const ParsedArgs& args, const v1::ServerInfo& info, uint64_t seed) {
  Job job;
  if (args.Has("suite")) {
    const std::string suite = args.Get("suite");
    for (const v1::Suite& s : info.suite_cases()) {
      if (s.name() != suite) continue;
      job.request.set_suite(suite);
      job.cases.assign(s.cases().begin(), s.cases().end());
      return job;
    }
    return absl::InvalidArgumentError(absl::StrCat("--suite: the server has no suite '", suite,
                                                   "'; it has ",
                                                   absl::StrJoin(info.suites(), ", ")));
  }
  std::vector<v1::BenchmarkCase>& out = job.cases;
  auto seq = args.GetIntList("seq_lens");
  auto batch = args.GetIntList("batch_sizes");
  auto heads = args.GetIntList("heads");
  auto head_dims = args.GetIntList("head_dims");
  for (const auto* list : {&seq, &batch, &heads, &head_dims}) {
    if (!list->ok()) return list->status();
  }
  auto kv_len = args.GetInt("kv_len");
  if (!kv_len.ok() || *kv_len < 0)
    return absl::InvalidArgumentError("--kv-len: expected an integer >= 0 (0: S = T)");
  auto kv_lens = KvLensSpec::Parse(args.Get("kv_lens"), "--kv-lens");
  if (!kv_lens.ok()) return kv_lens.status();
  std::vector<int64_t> kv_heads = {0};
  if (args.Has("kv_heads")) {
    auto k = args.GetIntList("kv_heads");
    if (!k.ok()) return k.status();
    kv_heads = *k;
  }
  std::vector<v1::DType> dtypes;
  for (const auto& d : args.GetList("dtypes")) {
    auto dt = ParseDTypeFlag(d);
    if (!dt.ok()) return dt.status();
    dtypes.push_back(*dt);
  }
  const std::vector<std::string> backends = args.GetList("backends");
  const std::set<std::string> known = ServerBackends(info);
  for (const auto& b : backends) {
    if (b != "auto" && !known.count(b)) {
      return absl::InvalidArgumentError(absl::StrCat("--backends: the server has no backend '", b,
                                                     "'; it has auto, ",
                                                     absl::StrJoin(known, ", ")));
    }
  }
  std::vector<bool> causal;
  const std::string c = args.Get("causal");
  if (c == "true" || c == "1")
    causal = {true};
  else if (c == "false" || c == "0")
    causal = {false};
  else if (c == "both")
    causal = {false, true};
  else
    return absl::InvalidArgumentError(
        absl::StrCat("--causal: expected true, false or both; got '", c, "'"));
  if (dtypes.empty() || backends.empty()) {
    return absl::InvalidArgumentError("--dtypes and --backends: need at least one name each");
  }
  const bool sweep_t = seq->size() > 1;
  const bool sweep_b = !sweep_t && batch->size() > 1;
  for (bool cz : causal) {
    for (int64_t b : *batch) {
      for (int64_t n : *heads) {
        for (int64_t k : kv_heads) {
          for (int64_t h : *head_dims) {
            for (int64_t t : *seq) {
              const int64_t s_len = *kv_len > 0 ? *kv_len : t;
              // The same lengths for every case of a (B, S): backends compare on equal work.
              auto lens = kv_lens->Lengths(b, s_len, seed);
              if (!lens.ok()) return lens.status();
              for (v1::DType dt : dtypes) {
                for (const auto& backend : backends) {
                  v1::BenchmarkCase bc;
                  bc.set_section(absl::StrCat(
                      sweep_t ? "" : absl::StrCat("T=", t, " "),
                      *kv_len > 0 ? absl::StrCat("S=", *kv_len, " ") : "",
                      sweep_b ? "" : absl::StrCat("B=", b, " "), "N=", n,
                      k > 0 ? absl::StrCat(" K=", k) : "", " H=", h, cz ? " causal" : "",
                      kv_lens->empty() ? "" : absl::StrCat(" kv_lens=", args.Get("kv_lens"))));
                  v1::Shape* s = bc.mutable_shape();
                  s->set_batch(b);
                  s->set_q_len(t);
                  s->set_kv_len(*kv_len);
                  bc.mutable_kv_lens()->Add(lens->begin(), lens->end());
                  s->set_num_heads(n);
                  s->set_num_kv_heads(k);
                  s->set_head_dim(h);
                  bc.set_dtype(dt);
                  bc.set_causal(cz);
                  bc.set_backend(backend);
                  out.push_back(std::move(bc));
                }
              }
            }
          }
        }
      }
    }
  }
  *job.request.mutable_cases()->mutable_cases() = {out.begin(), out.end()};
  return job;
}

absl::StatusOr<v1::BenchmarkOptions> BuildOptions(const ParsedArgs& args) {
  v1::BenchmarkOptions o;
  if (args.Has("warmup")) {
    auto v = args.GetInt("warmup");
    if (!v.ok()) return v.status();
    o.set_warmup(static_cast<int32_t>(*v));
  }
  if (args.Has("repeats")) {
    auto v = args.GetInt("repeats");
    if (!v.ok()) return v.status();
    o.set_repeats(static_cast<int32_t>(*v));
  }
  if (args.Has("budget")) {
    auto v = args.GetDouble("budget");
    if (!v.ok()) return v.status();
    o.set_case_budget_seconds(*v);
  }
  if (args.Has("rotate_inputs")) {
    auto v = args.GetInt("rotate_inputs");
    if (!v.ok()) return v.status();
    o.set_rotate_inputs(static_cast<int32_t>(*v));
  }
  auto seed = args.GetInt("seed");
  if (!seed.ok() || *seed < 0)
    return absl::InvalidArgumentError("--seed: expected an integer >= 0");
  o.set_seed(static_cast<uint64_t>(*seed));
  o.set_cuda_graph(args.GetBool("graph"));
  o.set_check_numerics(args.GetBool("check"));
  o.set_autotune(args.GetBool("autotune"));
  // TransformerEngine's DelayedScaling for cudnn_fp8 cases; the server checks the ranges.
  if (args.Has("fp8_margin")) {
    auto v = args.GetInt("fp8_margin");
    if (!v.ok()) return v.status();
    o.mutable_fp8_recipe()->set_margin(static_cast<int32_t>(*v));
  }
  if (args.Has("fp8_amax_history_len")) {
    auto v = args.GetInt("fp8_amax_history_len");
    if (!v.ok()) return v.status();
    o.mutable_fp8_recipe()->set_amax_history_len(static_cast<int32_t>(*v));
  }
  if (args.Has("fp8_amax_compute_algo")) {
    const std::string algo = args.Get("fp8_amax_compute_algo");
    if (algo != "max" && algo != "most_recent") {
      return absl::InvalidArgumentError(
          absl::StrCat("--fp8_amax_compute_algo: expected max or most_recent; got '", algo, "'"));
    }
    o.mutable_fp8_recipe()->set_amax_compute_algo(algo);
  }
  return o;
}

std::string NowIso() {
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return buf;
}

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
  f.close();
  if (!f) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot write"));
  return absl::OkStatus();
}

// Sends a job's cases one call each from `workers` threads until all are done, the run is
// cancelled, or the server refuses the job as a whole. The first call runs alone until the server
// has admitted it (its JobStarted came), so a refusal of the whole job is one call, not one per
// case.
class Dispatcher {
 public:
  Dispatcher(std::shared_ptr<grpc::Channel> channel, Job job,
             std::optional<std::chrono::system_clock::time_point> deadline, Progress& progress,
             bool tls)
      : stub_(v1::AttentionService::NewStub(channel)),
        cases_(std::move(job.cases)),
        request_(std::move(job.request)),
        deadline_(deadline),
        progress_(progress),
        tls_(tls),
        sent_(cases_.size(), false),
        records_(cases_.size()) {}

  std::vector<CaseRecord> Run(int workers) {
    std::vector<std::thread> threads;
    for (int w = 0; w < workers; ++w) threads.emplace_back([this] { Work(); });
    // Ctrl-C: stop taking cases and cancel the calls in flight (their cases stop on the server).
    while (finished_.load() < static_cast<int>(threads.size())) {
      if (g_interrupted.load() && !cancelled_.exchange(true)) Stop();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (auto& t : threads) t.join();
    std::vector<CaseRecord> done;
    for (size_t i = 0; i < records_.size(); ++i) {
      if (sent_[i]) done.push_back(std::move(records_[i]));
    }
    return done;
  }

  bool cancelled() const { return cancelled_.load(); }
  // The server's refusal of the whole job, as one line; empty when it took the job.
  const std::string& refusal() const { return refusal_; }
  grpc::StatusCode refusal_code() const { return refusal_code_; }

 private:
  // Codes a call ends with, before its case ran, for what holds for every case of the job: the
  // caller may not run it (PERMISSION_DENIED, UNAUTHENTICATED), or the job breaks a rule
  // (INVALID_ARGUMENT: the server validates the whole job in every call).
  static bool RefusesTheJob(grpc::StatusCode code) {
    return code == grpc::PERMISSION_DENIED || code == grpc::UNAUTHENTICATED ||
           code == grpc::INVALID_ARGUMENT;
  }

  // Wakes the workers waiting for the first call and cancels the calls in flight.
  void Stop() {
    std::lock_guard<std::mutex> lock(mu_);
    for (grpc::ClientContext* ctx : in_flight_) ctx->TryCancel();
    admitted_ = true;
    admitted_cv_.notify_all();
  }

  void Admitted() {
    std::lock_guard<std::mutex> lock(mu_);
    admitted_ = true;
    admitted_cv_.notify_all();
  }

  void Work() {
    for (;;) {
      size_t i;
      {
        std::unique_lock<std::mutex> lock(mu_);
        admitted_cv_.wait(lock, [this] { return admitted_ || next_ == 0; });
        if (next_ >= cases_.size() || cancelled_.load() || !refusal_.empty()) break;
        i = next_++;
        sent_[i] = true;
      }
      RunOne(i);
    }
    finished_.fetch_add(1);
  }

  // A result for a case that never ran on the server: its status and why, no numerics.
  static v1::CaseResult NotRun(const v1::BenchmarkCase& c, absl::StatusCode status,
                               const std::string& message) {
    v1::CaseResult r;
    *r.mutable_case_() = c;
    r.set_status(CodeNumber(status));
    r.set_message(message);
    r.set_max_abs_error(-1);
    r.set_rel_l2_error(-1);
    r.set_causal_first_diff(-1);
    r.set_causal_last_diff(-1);
    return r;
  }

  void RunOne(size_t i) {
    const v1::BenchmarkCase& c = cases_[i];
    const CaseRecord sent{NotRun(c, absl::StatusCode::kOk, ""), ""};
    progress_.Started(absl::StrCat(CaseLabel(sent, "series"), " ", CaseLabel(sent, "problem")));
    std::optional<CaseRecord> record = Call(i);
    if (!record) return;  // the job was refused: RunBench says so once
    progress_.Finished(*record);
    records_[i] = *std::move(record);
  }

  // One RunBenchmark call running the job's case i alone; cancellable through in_flight_.
  // Nothing when the server refused the whole job (refusal_ then says why).
  std::optional<CaseRecord> Call(size_t i) {
    const v1::BenchmarkCase& c = cases_[i];
    v1::RunBenchmarkRequest req = request_;
    req.add_case_indices(static_cast<int32_t>(i));
    grpc::ClientContext ctx;
    if (deadline_) ctx.set_deadline(*deadline_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      in_flight_.insert(&ctx);
      if (cancelled_.load() || !refusal_.empty()) ctx.TryCancel();
    }
    CaseRecord record;
    bool read = false, got = false;
    auto reader = stub_->RunBenchmark(&ctx, req);
    v1::RunBenchmarkEvent e;
    while (reader->Read(&e)) {
      if (!read) Admitted();
      read = true;
      if (e.has_result()) {
        record.result = e.result();
        got = true;
      }
    }
    const grpc::Status status = reader->Finish();
    {
      std::lock_guard<std::mutex> lock(mu_);
      in_flight_.erase(&ctx);
    }
    if (!read && !status.ok() && RefusesTheJob(status.error_code())) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (refusal_.empty()) {
          refusal_ = DescribeRpcError(status, ctx, tls_);
          refusal_code_ = status.error_code();
        }
      }
      Stop();
      return std::nullopt;
    }
    Admitted();
    record.replica = ctx.peer();
    if (!got) {
      // The code is the status column already; the message is the server's alone.
      record.result =
          NotRun(c, status.ok() ? absl::StatusCode::kInternal : FromGrpcCode(status.error_code()),
                 status.ok() ? "the server sent no result" : status.error_message());
      record.result.set_index(static_cast<int32_t>(i));
      record.result.set_total(static_cast<int32_t>(cases_.size()));
    }
    return record;
  }

  std::unique_ptr<v1::AttentionService::Stub> stub_;
  const std::vector<v1::BenchmarkCase> cases_;
  const v1::RunBenchmarkRequest request_;  // the job, its options, device and client id
  const std::optional<std::chrono::system_clock::time_point> deadline_;
  Progress& progress_;
  const bool tls_;
  std::mutex mu_;
  std::condition_variable admitted_cv_;
  bool admitted_ = false;  // the first call was admitted or ended: the others may go
  size_t next_ = 0;
  std::vector<bool> sent_;
  std::set<grpc::ClientContext*> in_flight_;
  std::vector<CaseRecord> records_;
  std::string refusal_;
  grpc::StatusCode refusal_code_ = grpc::OK;
  std::atomic<bool> cancelled_{false};
  std::atomic<int> finished_{0};
};

}  // namespace

std::vector<OptionSpec> BenchSpecs() {
  return {
      {"suite", "NAME", "", "a suite the server names (codelab, large); else the axes below"},
      {"seq_lens", "LIST", "128", "query lengths T (S = T unless --kv-len)"},
      {"kv_len", "S", "0", "key/value positions S of every case; 0: S = T"},
      {"kv_lens", "LENS", "", KvLensSpec::Help()},
      {"batch_sizes", "LIST", "4", "batch sizes B"},
      {"heads", "LIST", "8", "query heads N"},
      {"kv_heads", "LIST", "", "key/value heads K (default: K = N); N % K must be 0"},
      {"head_dims", "LIST", "64", "head dimensions H"},
      {"dtypes", "LIST", "bfloat16", "float32, bfloat16, float16"},
      {"backends", "LIST", "auto", "backend names from `attn-client info`, or auto"},
      {"causal", "WHEN", "false", "true, false or both"},
      {"warmup", "N", "", "untimed calls per case (server default: 10)"},
      {"repeats", "N", "", "timed calls per case (server default: 50)"},
      {"budget", "SECONDS", "", "stop timing a case after this much (server default: 2)"},
      {"rotate_inputs", "N", "", "input sets cycled call by call, 1..64 (server default: 1)"},
      {"seed", "N", "0", "seed of the generated inputs"},
      {"graph", "", "", "time CUDA-graph replays (no launch overhead)"},
      {"check", "", "", "compare every output with the float64 reference (numerics columns)"},
      {"autotune", "", "", "let backends with several plans time them"},
      {"fp8_margin", "N", "",
       "cudnn_fp8 recipe: scale = (448 / amax) / 2^margin (server default: 0)"},
      {"fp8_amax_history_len", "N", "",
       "cudnn_fp8 recipe: calls of amax history (server default: 1024)"},
      {"fp8_amax_compute_algo", "ALGO", "",
       "cudnn_fp8 recipe: max or most_recent (server default: max)"},
      {"device", "N", "-1", "the server's device index; -1: the least busy"},
      {"parallel", "N", "0", "cases in flight at once; 0: one per replica of --target"},
      {"out", "DIR", "", "write DIR/results.csv, DIR/results.json and DIR/report.html"},
      {"progress", "WHEN", "auto", "auto (a bar on a terminal, lines otherwise), bar, lines, none"},
  };
}

int RunBench(const CommonOptions& common, const ParsedArgs& args, const std::string& command_line) {
  auto device = args.GetInt("device");
  auto parallel = args.GetInt("parallel");
  if (!device.ok() || *device < -1) return Fail(kExitUsage, "--device: expected an index >= -1");
  if (!parallel.ok() || *parallel < 0 || *parallel > 256) {
    return Fail(kExitUsage, "--parallel: expected 0..256");
  }
  auto options = BuildOptions(args);
  if (!options.ok()) return Fail(kExitUsage, std::string(options.status().message()));
  const std::string progress_mode = args.Get("progress");
  if (progress_mode != "auto" && progress_mode != "bar" && progress_mode != "lines" &&
      progress_mode != "none") {
    return Fail(kExitUsage, "--progress: expected auto, bar, lines or none");
  }
  const auto start = std::chrono::steady_clock::now();
  std::optional<std::chrono::system_clock::time_point> deadline;
  if (common.timeout_s > 0) {
    deadline = std::chrono::system_clock::now() +
               std::chrono::milliseconds(static_cast<int64_t>(common.timeout_s * 1e3));
  }
  auto channel = MakeChannel(common.target);
  Report report;
  report.command = command_line;
  report.target = common.target_spec;
  report.created = NowIso();
  report.options = *options;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(
        deadline.value_or(std::chrono::system_clock::now() + std::chrono::seconds(30)));
    const grpc::Status s = v1::AttentionService::NewStub(channel)->GetServerInfo(
        &ctx, v1::GetServerInfoRequest(), &report.server);
    if (!s.ok()) return Fail(kExitFailed, DescribeRpcError(s, ctx, common.target.tls));
  }
  auto job = BuildJob(args, report.server, options->seed());
  if (!job.ok()) return Fail(kExitUsage, std::string(job.status().message()));
  if (job->cases.empty()) return Fail(kExitUsage, "no cases to run");
  *job->request.mutable_options() = *options;
  job->request.set_device(static_cast<int>(*device));
  job->request.set_client_id(common.client_id);

  const bool terminal = isatty(STDERR_FILENO) == 1;
  const bool bar = progress_mode == "bar" || (progress_mode == "auto" && terminal);
  std::FILE* progress_out = progress_mode == "none" ? std::fopen("/dev/null", "w") : stderr;
  Progress progress(static_cast<int>(job->cases.size()), bar, progress_out);
  const int workers = static_cast<int>(std::min<int64_t>(
      *parallel > 0 ? *parallel : common.target.replicas, static_cast<int64_t>(job->cases.size())));
  struct sigaction sa {};
  sa.sa_handler = OnSigint;
  sigaction(SIGINT, &sa, nullptr);
  Dispatcher dispatcher(channel, *std::move(job), deadline, progress, common.target.tls);
  report.cases = dispatcher.Run(std::max(1, workers));
  progress.Close();
  if (progress_out != stderr) std::fclose(progress_out);
  if (!dispatcher.refusal().empty()) {
    return Fail(dispatcher.refusal_code() == grpc::INVALID_ARGUMENT ? kExitUsage : kExitFailed,
                "the server refused the job: " + dispatcher.refusal());
  }
  report.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  if (common.format == "table")
    std::fputs(RenderTables(report).c_str(), stdout);
  else if (common.format == "csv")
    std::fputs(RenderCsv(report).c_str(), stdout);
  else
    std::fputs(RenderJson(report).c_str(), stdout);
  std::fflush(stdout);
  if (args.Has("out")) {
    const std::string dir = args.Get("out");
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      return Fail(kExitFailed, absl::StrCat("--out ", dir, ": cannot create the directory"));
    }
    for (const auto& [name, text] :
         {std::pair<std::string, std::string>{"results.csv", RenderCsv(report)},
          {"results.json", RenderJson(report)},
          {"report.html", RenderHtml(report)}}) {
      if (auto s = WriteFile(dir + "/" + name, text); !s.ok()) {
        return Fail(kExitFailed, std::string(s.message()));
      }
    }
    std::fprintf(stderr, "wrote %s/results.csv, %s/results.json and %s/report.html\n", dir.c_str(),
                 dir.c_str(), dir.c_str());
  }
  if (dispatcher.cancelled()) {
    return Fail(kExitInterrupted, absl::StrFormat("interrupted: %d of the job's cases ran; the "
                                                  "cases in flight were cancelled on the server",
                                                  static_cast<int>(report.cases.size())));
  }
  return Count(report.cases).failed == 0 ? kExitOk : kExitFailed;
}

}  // namespace attn::client
