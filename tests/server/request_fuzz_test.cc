// Request handling under hostile input: seeded mutations of valid requests (byte flips,
// insertions, cuts, huge varints, splices), oversized payloads, short deadlines and cancelled
// streams. In process: parsing, validation and cost admission never crash and keep their
// invariants. Against a real server: it stays up, answers every call, its resident memory stays
// flat, and a valid call afterwards is still right.
//
// ATTN_FUZZ_SECONDS (default 12) and ATTN_FUZZ_SEED (default 1) set the run; bench/fuzz.sh runs
// it for long with a fresh seed. A finding becomes a case in kRegressions below.
#include <google/protobuf/stubs/logging.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "attention/v1/attention.grpc.pb.h"
#include "attn/registry.h"
#include "bench/loopback.h"
#include "gtest/gtest.h"
#include "server/admission.h"
#include "server/server_helpers.h"
#include "server/validation.h"
#include "server_process.h"

namespace attn::server {
namespace {
namespace v1 = attention::v1;
using ::attn::testing::MakeShape;
using Clock = std::chrono::steady_clock;

double EnvOr(const char* name, double fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atof(v) : fallback;
}

// Valid requests the mutations start from.
std::vector<std::string> AttendCorpus() {
  std::vector<std::string> out;
  v1::AttendRequest a;
  *a.mutable_shape() = MakeShape(1, 8, 2, 16);
  a.set_dtype(v1::FLOAT32);
  a.mutable_tensors()->mutable_q()->assign(8 * 2 * 16 * 4, '\x01');
  a.mutable_tensors()->mutable_k()->assign(8 * 2 * 16 * 4, '\x02');
  a.mutable_tensors()->mutable_v()->assign(8 * 2 * 16 * 4, '\x03');
  out.push_back(a.SerializeAsString());
  v1::AttendRequest g;
  *g.mutable_shape() = MakeShape(2, 64, 4, 32, 2);
  g.set_dtype(v1::BFLOAT16);
  g.set_causal(true);
  g.set_scale(0.125);
  g.set_backend("auto");
  g.mutable_generated()->set_seed(3);
  g.set_client_id("fuzz");
  out.push_back(g.SerializeAsString());
  g.add_kv_lens(64);  // per-sequence lengths: S and a short one
  g.add_kv_lens(5);
  out.push_back(g.SerializeAsString());
  return out;
}

std::vector<std::string> BenchmarkCorpus() {
  std::vector<std::string> out;
  v1::RunBenchmarkRequest s;
  s.set_suite("codelab");
  s.mutable_options()->set_repeats(2);
  s.mutable_options()->set_check_numerics(true);
  out.push_back(s.SerializeAsString());
  s.add_case_indices(3);  // one case of the suite, as attn-client sends it
  s.add_case_indices(0);
  out.push_back(s.SerializeAsString());
  v1::RunBenchmarkRequest c;
  auto* bc = c.mutable_cases()->add_cases();
  bc->set_section("fuzz");
  *bc->mutable_shape() = MakeShape(1, 32, 2, 16);
  bc->set_dtype(v1::FLOAT16);
  bc->set_backend("cpu");
  bc->add_kv_lens(7);
  c.mutable_options()->set_warmup(1);
  c.mutable_options()->set_repeats(3);
  c.mutable_options()->mutable_fp8_recipe()->set_margin(1);
  c.set_device(-1);
  out.push_back(c.SerializeAsString());
  return out;
}

// Inputs found by this fuzzer that once broke an invariant; each stays a case.
const std::vector<std::string>& Regressions() {
  static const std::vector<std::string> cases = [] {
    std::vector<std::string> r;
    // Shape with every dimension at INT64_MAX: the element counts must overflow cleanly.
    v1::AttendRequest a;
    v1::Shape* s = a.mutable_shape();
    for (auto set :
         {&v1::Shape::set_batch, &v1::Shape::set_q_len, &v1::Shape::set_kv_len,
          &v1::Shape::set_num_heads, &v1::Shape::set_num_kv_heads, &v1::Shape::set_head_dim}) {
      (s->*set)(INT64_MAX);
    }
    a.set_dtype(v1::FLOAT32);
    a.mutable_generated();
    r.push_back(a.SerializeAsString());
    // A NaN scale.
    v1::AttendRequest n;
    *n.mutable_shape() = MakeShape(1, 8, 1, 8);
    n.set_dtype(v1::FLOAT32);
    n.set_scale(std::nan(""));
    n.mutable_generated();
    r.push_back(n.SerializeAsString());
    return r;
  }();
  return cases;
}

// One mutation of `in`.
std::string Mutate(const std::string& in, std::mt19937_64& rng,
                   const std::vector<std::string>& corpus) {
  std::string s = in;
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    const size_t at = s.empty() ? 0 : rng() % s.size();
    switch (rng() % 7) {
      case 0:  // flip bits
        if (!s.empty()) s[at] = static_cast<char>(s[at] ^ (1 << (rng() % 8)));
        break;
      case 1:  // random byte
        if (!s.empty()) s[at] = static_cast<char>(rng());
        break;
      case 2:  // insert bytes
        s.insert(at, 1 + rng() % 8, static_cast<char>(rng()));
        break;
      case 3:  // cut a range
        if (!s.empty()) s.erase(at, 1 + rng() % 16);
        break;
      case 4: {                      // a huge varint (lengths, dimensions, counts)
        const size_t n = rng() % 9;  // continuation bytes, then the last byte
        std::string varint(n, '\xff');
        varint.push_back('\x7f');
        s = s.substr(0, at) + varint + s.substr(at);
        break;
      }
      case 5: {  // splice another corpus entry
        const std::string& other = corpus[rng() % corpus.size()];
        s = s.substr(0, at) + other.substr(other.empty() ? 0 : rng() % other.size());
        break;
      }
      default:  // truncate
        s.resize(at);
        break;
    }
  }
  return s;
}

// Validation and admission of one parsed request, as the service does it, with invariants.
void CheckAttend(const v1::AttendRequest& r, const Throughputs& rates) {
  RequestLimits limits;
  auto p = ValidateAttend(r, limits);
  if (!p.ok()) {
    ASSERT_FALSE(p.status().message().empty());
    return;
  }
  ASSERT_TRUE(ValidateProblem(*p).ok()) << p->ToString();
  auto b = BackendRegistry::Default().Resolve(r.backend().empty() ? "auto" : r.backend(), *p,
                                              CpuDeviceInfo());
  if (!b.ok()) return;
  const CallPlan plan = PlanCall(**b, *p, PieceFlops(**b, p->dtype, rates));
  const Cost cost = CallCost(plan, rates);
  ASSERT_TRUE(std::isfinite(cost.seconds) && cost.seconds >= 0) << p->ToString();
  ASSERT_GE(plan.tensor_bytes, 0);
  (void)AdmitCall("Attend", plan, cost, rates, AdmissionLimits());
}

void CheckBenchmark(const v1::RunBenchmarkRequest& r, const Throughputs& rates) {
  RequestLimits limits;
  auto options = BenchOptionsFromProto(r.options(), limits);
  if (!options.ok()) return;
  auto cases = BenchCasesFromRequest(r, CpuDeviceInfo(), limits);
  if (!cases.ok()) {
    ASSERT_FALSE(cases.status().message().empty());
    return;
  }
  ASSERT_LE(cases->cases.size(), static_cast<size_t>(limits.max_cases));
  ASSERT_EQ(cases->indices.size(), cases->cases.size());
  for (int index : cases->indices) ASSERT_TRUE(index >= 0 && index < cases->job_total);
  for (const BenchCase& c : cases->cases) {
    ASSERT_TRUE(ValidateProblem(c.problem).ok());
    auto plan = PlanCase(c, *options, CpuDeviceInfo());
    if (!plan.ok()) continue;
    const Cost cost = CaseCost(*plan, rates);
    ASSERT_TRUE(std::isfinite(cost.seconds) && cost.seconds >= 0) << c.problem.ToString();
    ASSERT_GE(cost.host_bytes, 0);
  }
}

TEST(RequestFuzz, MutatedRequestsGoThroughValidationAndAdmissionWithTheirInvariants) {
  // Mutants with invalid UTF-8 in string fields make protobuf log each one; not news here.
  google::protobuf::SetLogHandler(nullptr);
  const Throughputs rates = Throughputs::Fixed({{{"cpu", DType::kFloat32}, 1e10}}, 1e10, 1e10);
  for (const std::string& bytes : Regressions()) {
    v1::AttendRequest r;
    ASSERT_TRUE(r.ParseFromString(bytes));
    CheckAttend(r, rates);
    EXPECT_FALSE(ValidateAttend(r, RequestLimits()).ok());
  }
  const auto attend = AttendCorpus(), bench = BenchmarkCorpus();
  std::vector<std::string> all = attend;
  all.insert(all.end(), bench.begin(), bench.end());
  std::mt19937_64 rng(static_cast<uint64_t>(EnvOr("ATTN_FUZZ_SEED", 1)));
  const auto end = Clock::now() + std::chrono::duration<double>(EnvOr("ATTN_FUZZ_SECONDS", 12) / 3);
  int64_t tried = 0, parsed = 0;
  while (Clock::now() < end) {
    for (int i = 0; i < 100; ++i, ++tried) {
      const std::string bytes = Mutate(all[rng() % all.size()], rng, all);
      v1::AttendRequest a;
      if (a.ParseFromString(bytes)) {
        ++parsed;
        CheckAttend(a, rates);
      }
      v1::RunBenchmarkRequest b;
      if (b.ParseFromString(bytes)) {
        ++parsed;
        CheckBenchmark(b, rates);
      }
      if (::testing::Test::HasFatalFailure()) {
        ADD_FAILURE() << "input (hex) of length " << bytes.size()
                      << " broke an invariant; add it to Regressions()";
        return;
      }
    }
  }
  std::printf("in process: %lld mutated requests, %lld parsed as a request\n",
              static_cast<long long>(tried), static_cast<long long>(parsed));
  EXPECT_GT(parsed, 0);
}

int64_t ResidentKiB(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6);
  }
  return -1;
}

// Raw bytes to a unary method, as a hostile client sends them; returns the status code.
grpc::StatusCode RawUnary(grpc::GenericStub& stub, const std::string& method,
                          const std::string& bytes, int deadline_ms, bool cancel) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(deadline_ms));
  return ::attn::loopback::RawUnaryCall(stub, ctx, method, bytes, nullptr, cancel).error_code();
}

TEST(RequestFuzz, AServerUnderMalformedOversizedAndCancelledRequestsStaysUpWithFlatMemory) {
  ::attn::testing::ServerProcess server(
      "fuzz", {"--max_request_mib=4", "--grpc_memory_mib=64", "--queue_depth=8",
               "--max_call_seconds=2", "--max_job_seconds=4", "--max_host_mib=64"});
  ASSERT_GT(server.port(), 0) << ::attn::testing::ReadTextFile(server.log());
  const double seconds = EnvOr("ATTN_FUZZ_SECONDS", 12);
  const uint64_t seed = static_cast<uint64_t>(EnvOr("ATTN_FUZZ_SEED", 1));
  const auto attend = AttendCorpus(), bench = BenchmarkCorpus();
  std::vector<std::string> all = attend;
  all.insert(all.end(), bench.begin(), bench.end());
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::map<grpc::StatusCode, int64_t> codes;
  const auto worker = [&](int id) {
    std::mt19937_64 rng(seed * 1000 + static_cast<uint64_t>(id));
    auto channel = grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
    grpc::GenericStub raw(channel);
    auto stub = v1::AttentionService::NewStub(channel);
    std::map<grpc::StatusCode, int64_t> mine;
    while (!stop) {
      const uint64_t pick = rng() % 100;
      const int deadline_ms = 50 + static_cast<int>(rng() % 400);
      const bool cancel = rng() % 10 == 0;
      if (pick < 5) {  // oversized: just over and just under --max_request_mib
        v1::AttendRequest big;
        *big.mutable_shape() = MakeShape(1, 1, 1, 1);
        big.set_dtype(v1::FLOAT32);
        big.mutable_tensors()->mutable_q()->assign((rng() % 2 ? 5 : 3) << 20, 'x');
        ++mine[RawUnary(raw, "/attention.v1.AttentionService/Attend", big.SerializeAsString(),
                        deadline_ms, cancel)];
      } else if (pick < 70) {
        ++mine[RawUnary(raw, "/attention.v1.AttentionService/Attend",
                        Mutate(all[rng() % all.size()], rng, all), deadline_ms, cancel)];
      } else if (pick < 75) {
        ++mine[RawUnary(raw, "/attention.v1.AttentionService/GetServerInfo",
                        Mutate(all[rng() % all.size()], rng, all), deadline_ms, cancel)];
      } else {  // a benchmark job from a mutant that parses, read part-way, often cancelled
        v1::RunBenchmarkRequest job;
        if (!job.ParseFromString(Mutate(bench[rng() % bench.size()], rng, all))) continue;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(deadline_ms));
        auto reader = stub->RunBenchmark(&ctx, job);
        v1::RunBenchmarkEvent e;
        const int reads = static_cast<int>(rng() % 4);
        for (int i = 0; i < reads && reader->Read(&e); ++i) {
        }
        if (cancel || rng() % 2 == 0) ctx.TryCancel();
        while (reader->Read(&e)) {
        }
        ++mine[reader->Finish().error_code()];
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& [code, n] : mine) codes[code] += n;
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back(worker, i);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds / 3));
  const int64_t warm_kib = ResidentKiB(server.pid());
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds * 2 / 3));
  const int64_t end_kib = ResidentKiB(server.pid());
  stop = true;
  for (auto& t : threads) t.join();
  ASSERT_TRUE(server.Running()) << "the server died:\n"
                                << ::attn::testing::ReadTextFile(server.log());
  int64_t calls = 0;
  std::string summary;
  for (const auto& [code, n] : codes) {
    calls += n;
    absl::StrAppend(&summary, " ", static_cast<int>(code), ":", n);
  }
  std::printf(
      "against the server: %lld calls in %.0f s (seed %llu), codes%s; RSS %lld -> %lld KiB\n",
      static_cast<long long>(calls), seconds, static_cast<unsigned long long>(seed),
      summary.c_str(), static_cast<long long>(warm_kib), static_cast<long long>(end_kib));
  EXPECT_GT(calls, 100);
  EXPECT_EQ(codes.count(grpc::StatusCode::UNKNOWN), 0u) << "a handler failed without a status";
  EXPECT_LT(end_kib - warm_kib, 48 * 1024) << "resident memory grew under the stream";
  // Still serving, and right.
  auto stub = ::attn::testing::Connect(server.port());
  v1::AttendRequest ok;
  *ok.mutable_shape() = MakeShape(1, 4, 1, 8);
  ok.set_dtype(v1::FLOAT32);
  std::vector<float> ones(4 * 8, 1.0f);
  const std::string bytes(reinterpret_cast<const char*>(ones.data()), ones.size() * 4);
  ok.mutable_tensors()->set_q(bytes);
  ok.mutable_tensors()->set_k(bytes);
  ok.mutable_tensors()->set_v(bytes);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::AttendResponse resp;
  const grpc::Status s = stub->Attend(&ctx, ok, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(resp.output().size(), bytes.size());
  EXPECT_EQ(resp.output(), bytes) << "attention over equal rows of ones is ones";
}

}  // namespace
}  // namespace attn::server
