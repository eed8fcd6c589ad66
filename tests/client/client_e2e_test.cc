// attn-client end to end: the real binaries, attn-server on the cpu backend on picked loopback
// ports and attn-client run as a user would, checking its output, files and exit codes; a sweep
// split over two servers with round_robin; the HTML report rendered by headless Chromium.
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/npy.h"
#include "server_process.h"
#include "test_certificates.h"

namespace attn::client {
namespace {

using ::attn::testing::BinaryPath;
using ::attn::testing::ReadTextFile;
using ::attn::testing::ScratchDir;
using ::attn::testing::ServerProcess;

struct ClientRun {
  int rc = -1;
  std::string out, err;
};

// attn-client with `args` (shell words), stdout and stderr kept apart.
ClientRun Client(const std::string& args) {
  static int n = 0;
  const std::string out = absl::StrCat(ScratchDir(), "client_", n, ".out");
  const std::string err = absl::StrCat(ScratchDir(), "client_", n++, ".err");
  const std::string cmd = absl::StrCat(BinaryPath("ATTN_CLIENT_BINARY", ATTN_CLIENT_BINARY), " ",
                                       args, " >", out, " 2>", err);
  const int status = std::system(cmd.c_str());
  ClientRun r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ReadTextFile(out);
  r.err = ReadTextFile(err);
  return r;
}

google::protobuf::Struct ParseJson(const std::string& text) {
  google::protobuf::Struct doc;
  auto s = google::protobuf::util::JsonStringToMessage(text, &doc);
  EXPECT_TRUE(s.ok()) << s << "\n" << text;
  return doc;
}

class ClientE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new ServerProcess("a"); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_GT(server_->port(), 0) << "attn-server did not start: " << ReadTextFile(server_->log());
  }
  static std::string Target() { return "--target=" + server_->address(); }
  static ServerProcess* server_;
};
ServerProcess* ClientE2E::server_ = nullptr;

TEST_F(ClientE2E, InfoListsTheDeviceAndEveryBackendsVerdict) {
  ClientRun r = Client(Target() + " info");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("cpu ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cudnn: needs a CUDA device"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ok: float64 reference on the host"), std::string::npos) << r.out;
  ClientRun j = Client(Target() + " info --format=json");
  ASSERT_EQ(j.rc, 0) << j.err;
  auto doc = ParseJson(j.out);
  EXPECT_EQ(doc.fields()
                .at("devices")
                .list_value()
                .values(0)
                .struct_value()
                .fields()
                .at("kind")
                .string_value(),
            "cpu");
}

TEST_F(ClientE2E, HealthReportsBothServiceNames) {
  ClientRun r = Client(Target() + " health");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("server: SERVING"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("attention.v1.AttentionService: SERVING"), std::string::npos) << r.out;
}

TEST_F(ClientE2E, AttendChecksAgainstTheLocalReferenceAndWritesNpy) {
  const std::string out = ScratchDir() + "attend_out.npy";
  ClientRun r = Client(Target() +
                       " attend --batch=2 --seq-len=33 --heads=4 --kv-heads=2 --head-dim=32 "
                       "--dtype=bfloat16 --causal --seed=7 --check --output=" +
                       out);
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  // auto runs the cpu backend on this server; the check is the float64 reference, computed here.
  EXPECT_NE(r.out.find("check:         max |cpu - float64 reference| "), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("outputs close (atol=0.01, rtol=0.01): True"), std::string::npos) << r.out;
  auto a = ReadNpyFile(out);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->type, NpyType::kBFloat16);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 33, 4, 32}));
  double sum = 0;
  for (int64_t i = 0; i < a->element_count(); ++i) sum += std::abs(NpyElement(*a, i));
  EXPECT_GT(sum, 0) << "all-zero output";
}

// --kv-lens: a list or a seeded draw, sent with the request and applied by the local check.
TEST_F(ClientE2E, AttendTakesKvLensAndChecksThemLocally) {
  for (const char* lens : {"1,40,17", "uniform", "uniform:2:9"}) {
    ClientRun r = Client(Target() +
                         " attend --batch=3 --seq-len=5 --kv-len=40 --heads=4 --kv-heads=2 "
                         "--head-dim=32 --dtype=float16 --causal --seed=3 --check --kv-lens=" +
                         lens);
    ASSERT_EQ(r.rc, 0) << lens << ": " << r.err << r.out;
    EXPECT_NE(r.out.find("outputs close (atol=0.01, rtol=0.01): True"), std::string::npos) << r.out;
  }
  ClientRun bad = Client(Target() + " attend --batch=3 --kv-lens=1,2");
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.err.find("--kv-lens: 2 lengths for batch 3"), std::string::npos) << bad.err;
  ClientRun range = Client(Target() + " attend --batch=2 --seq-len=16 --kv-lens=1,17");
  EXPECT_EQ(range.rc, 2);
  EXPECT_NE(range.err.find("INVALID_ARGUMENT: kv_lens[1] = 17 is outside 1..S (S = 16)"),
            std::string::npos)
      << range.err;
}

// Bench cases carry the lengths; a decode-like section shows the effective K/V bandwidth.
TEST_F(ClientE2E, BenchTakesKvLensAndShowsTheKeyValueBandwidth) {
  ClientRun r = Client(Target() +
                       " bench --seq-lens=1 --kv-len=64 --batch-sizes=2,3 --heads=2 --head-dims=16 "
                       "--dtypes=float32 --backends=cpu --kv-lens=uniform --warmup=0 --repeats=2 "
                       "--check");
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("K/V GB/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kv_lens=["), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 cases: 2 ok, 0 unsupported, 0 failed"), std::string::npos) << r.out;
}

TEST_F(ClientE2E, AttendTakesNpyInputsAndTheirShapesGiveTheProblem) {
  // Q (1, 5, 2, 8) float32 and K = V (1, 7, 1, 8): MQA with S != T, converted to float16.
  auto make = [](std::vector<int64_t> shape, int salt) {
    NpyArray a;
    a.type = NpyType::kFloat32;
    a.shape = shape;
    for (int64_t i = 0; i < a.element_count(); ++i) {
      const float v = static_cast<float>(((i * 7 + salt) % 13) - 6) / 8.0f;
      a.data.append(reinterpret_cast<const char*>(&v), 4);
    }
    return a;
  };
  const std::string dir = ScratchDir();
  ASSERT_TRUE(WriteNpyFile(dir + "/q.npy", make({1, 5, 2, 8}, 1)).ok());
  ASSERT_TRUE(WriteNpyFile(dir + "/k.npy", make({1, 7, 1, 8}, 2)).ok());
  ASSERT_TRUE(WriteNpyFile(dir + "/v.npy", make({1, 7, 1, 8}, 3)).ok());
  ClientRun r =
      Client(Target() + " attend --dtype=float16 --check --format=json --q=" + dir +
             "/q.npy --k=" + dir + "/k.npy --v=" + dir + "/v.npy --output=" + dir + "/o.npy");
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  auto doc = ParseJson(r.out);
  EXPECT_TRUE(doc.fields().at("close").bool_value()) << r.out;
  EXPECT_LT(doc.fields().at("max_abs_diff").number_value(), 1e-2) << r.out;
  auto o = ReadNpyFile(dir + "/o.npy");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->shape, (std::vector<int64_t>{1, 5, 2, 8}));
  EXPECT_EQ(o->type, NpyType::kFloat16);
  // A mismatched K and V is refused locally, before any call.
  ASSERT_TRUE(WriteNpyFile(dir + "/v_bad.npy", make({1, 6, 1, 8}, 3)).ok());
  ClientRun bad = Client(Target() + " attend --q=" + dir + "/q.npy --k=" + dir +
                         "/k.npy --v=" + dir + "/v_bad.npy");
  EXPECT_EQ(bad.rc, 2) << bad.err;
  EXPECT_NE(bad.err.find("--k and --v: shapes differ"), std::string::npos) << bad.err;
}

// One line on stderr, naming the code and the field, and the usage exit code.
TEST_F(ClientE2E, ServerErrorsAreOneClearLine) {
  ClientRun r = Client(Target() + " attend --heads=4 --kv-heads=3");
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("INVALID_ARGUMENT"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("num_kv_heads"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST_F(ClientE2E, UsageErrorsExitTwo) {
  for (const char* args :
       {"bench --frobnicate", "nosuchcommand", "bench --seq-lens=12,x", "bench --suite=nosuch",
        "bench --backends=cpu,nosuch", "attend --dtype=int8"}) {
    ClientRun r = Client(Target() + " " + args);
    EXPECT_EQ(r.rc, 2) << args << ": " << r.err;
    EXPECT_NE(r.err.find("attn-client: "), std::string::npos) << args << ": " << r.err;
  }
}

TEST(ClientNoServer, AnUnreachableTargetExitsOneWithAHint) {
  ClientRun r = Client("--target=127.0.0.1:1 --timeout=5 info");
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_NE(r.err.find("UNAVAILABLE"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("is attn-server running there?"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST_F(ClientE2E, BenchAxesWriteTheThreeFilesAndCountUnsupportedApart) {
  const std::string dir = ScratchDir() + "bench_out";
  ClientRun r =
      Client(Target() +
             " bench --seq-lens=16,32 --batch-sizes=1 --heads=2 --head-dims=16 "
             "--dtypes=float32 --backends=cpu,cudnn --warmup=1 --repeats=3 --check --out=" +
             dir);
  ASSERT_EQ(r.rc, 0) << r.err;  // unsupported is not a failure
  EXPECT_NE(r.out.find("Sequence-length sweep — B=1, N=2, H=16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cpu float32 (ms)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("4 cases: 2 ok, 2 unsupported, 0 failed"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("[4/4]"), std::string::npos)
      << "plain progress lines when not a terminal: " << r.err;
  auto doc = ParseJson(ReadTextFile(dir + "/results.json"));
  const auto& cases = doc.fields().at("cases").list_value().values();
  ASSERT_EQ(cases.size(), 4);
  int checked = 0;
  for (const auto& c : cases) {
    const auto& f = c.struct_value().fields();
    EXPECT_EQ(f.at("replica").string_value(), "ipv4:" + server_->address());
    if (f.at("status").string_value() == "OK") {
      EXPECT_GT(f.at("median_ms").number_value(), 0);
      EXPECT_GE(f.at("max_abs_error").number_value(), 0) << "--check asked for numerics";
      EXPECT_LT(f.at("max_abs_error").number_value(), 1e-5);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2);
  std::vector<std::string> csv =
      absl::StrSplit(ReadTextFile(dir + "/results.csv"), '\n', absl::SkipEmpty());
  EXPECT_EQ(csv.size(), 5u);
  const std::string html = ReadTextFile(dir + "/report.html");
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("</html>"), std::string::npos);
}

// What a backend cannot do (a head dim it has no kernel for, a dtype it does not take, no GPU
// here) is unsupported: n/a in the table, exit 0.
TEST_F(ClientE2E, WhatABackendCannotRunIsUnsupportedNotAFailure) {
  for (const char* axes : {"--backends=fused --head-dims=80 --dtypes=bfloat16",
                           "--backends=cudnn --dtypes=float32 --head-dims=64"}) {
    ClientRun r =
        Client(Target() + " bench --seq-lens=16 --heads=2 --warmup=0 --repeats=1 " + axes);
    EXPECT_EQ(r.rc, 0) << axes << ": " << r.err;
    EXPECT_NE(r.out.find("n/a"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("1 cases: 0 ok, 1 unsupported, 0 failed"), std::string::npos) << r.out;
  }
  ClientRun r = Client(Target() + " bench --seq-lens=16 --backends=flash9");
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("--backends: the server has no backend 'flash9'"), std::string::npos)
      << r.err;
}

// Options out of the server's rules refuse the whole job: one line naming the rule, exit 2, and
// no table of cases that never ran.
TEST_F(ClientE2E, OptionsTheServerRefusesExitTwoWithItsRule) {
  ClientRun r = Client(Target() +
                       " bench --seq-lens=16,32,64 --heads=1 --head-dims=16 --backends=cpu "
                       "--budget=120");
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("attn-client: the server refused the job: INVALID_ARGUMENT: "
                       "options.case_budget_seconds: must be in (0, 60], got 120"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.out, "");
}

// On a terminal (util-linux `script` gives the client a pseudo-terminal) progress is a bar
// redrawn in place with cases done / total, the current case and an ETA.
TEST_F(ClientE2E, ProgressIsABarOnATerminal) {
  if (std::system("command -v script >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "util-linux `script` not installed (Debian package bsdutils)";
  }
  const std::string log = ScratchDir() + "tty.log";
  const std::string cmd = absl::StrCat(
      "script -qc '", BinaryPath("ATTN_CLIENT_BINARY", ATTN_CLIENT_BINARY), " ", Target(),
      " bench --seq-lens=16,32,48 --heads=2 --head-dims=16 --dtypes=float32 --backends=cpu "
      "--warmup=1 --repeats=3 >/dev/null' ",
      log, " >/dev/null 2>&1");
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const std::string tty = ReadTextFile(log);
  EXPECT_NE(tty.find("\r\x1b[K["), std::string::npos) << "not redrawn in place: " << tty;
  EXPECT_NE(tty.find("] 0/3  ETA --:--  cpu float32 B4 T16"), std::string::npos) << tty;
  EXPECT_NE(tty.find("########] 3/3  ETA 0:00"), std::string::npos) << tty;
  EXPECT_EQ(tty.find("[3/3] ok"), std::string::npos) << "plain lines on a terminal: " << tty;
}

TEST_F(ClientE2E, AFailedCaseExitsOneAndSaysWhy) {
  ClientRun r = Client(Target() +
                       " bench --seq-lens=100000 --heads=64 --head-dims=256 --backends=cpu "
                       "--warmup=0 --repeats=1");
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_NE(r.out.find("RESOURCE_EXHAUSTED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("over --max_call_seconds=30"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 failed"), std::string::npos) << r.out;
}

// Ctrl-C during a long case: the client cancels the call, exits 130 at once, and the server's
// worker is free again (the next call does not wait behind the cancelled case).
TEST_F(ClientE2E, InterruptCancelsTheJobOnTheServer) {
  const std::string err = ScratchDir() + "interrupt.err";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    freopen("/dev/null", "w", stdout);
    freopen(err.c_str(), "w", stderr);
    const std::string binary = BinaryPath("ATTN_CLIENT_BINARY", ATTN_CLIENT_BINARY);
    const std::string target = Target();
    // B=1 is 8.6 GFLOP, about 1-2 s a call on 2 cores; 200 repeats hold the worker for minutes
    // (the cpu backend also stops inside a call, row by row).
    execl(binary.c_str(), binary.c_str(), target.c_str(), "bench", "--batch-sizes=1",
          "--seq-lens=2048", "--heads=8", "--head-dims=64", "--dtypes=float32", "--backends=cpu",
          "--warmup=0", "--repeats=200", "--budget=60", "--progress=bar",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  // The bar's first draw comes after the SIGINT handler is in place and as the case is sent; a
  // signal before that (a loaded machine starts the client slowly) would kill it outright.
  for (int i = 0; i < 400 && ReadTextFile(err).find("0/1  ETA") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  if (ReadTextFile(err).find("0/1  ETA") == std::string::npos) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    FAIL() << "the case never started: " << ReadTextFile(err);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto sent = std::chrono::steady_clock::now();
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  const double exit_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130) << ReadTextFile(err);
  EXPECT_LT(exit_s, 5.0);
  EXPECT_NE(ReadTextFile(err).find("interrupted"), std::string::npos) << ReadTextFile(err);
  const auto before = std::chrono::steady_clock::now();
  ClientRun r =
      Client(Target() + " attend --batch=1 --seq-len=16 --heads=1 --head-dim=16 --dtype=float32");
  const double next_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - before).count();
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_LT(next_s, 10.0) << "the cancelled case still held the server's worker";
}

// Two servers behind one comma-list target: round_robin spreads the cases, and each result says
// which replica ran it.
TEST(ClientRoundRobin, ASweepSplitsOverTwoServers) {
  ServerProcess a("rr_a"), b("rr_b");
  ASSERT_GT(a.port(), 0) << ReadTextFile(a.log());
  ASSERT_GT(b.port(), 0) << ReadTextFile(b.log());
  ClientRun r =
      Client("--target=" + a.address() + "," + b.address() +
             " --format=json bench "
             "--seq-lens=8,16,24,32,40,48 --heads=2 --head-dims=16 --dtypes=float32 --backends=cpu "
             "--warmup=1 --repeats=3");
  ASSERT_EQ(r.rc, 0) << r.err;
  auto doc = ParseJson(r.out);
  std::map<std::string, int> per_replica;
  for (const auto& c : doc.fields().at("cases").list_value().values()) {
    EXPECT_EQ(c.struct_value().fields().at("status").string_value(), "OK");
    ++per_replica[c.struct_value().fields().at("replica").string_value()];
  }
  EXPECT_EQ(per_replica.size(), 2u) << r.out;
  EXPECT_GT(per_replica["ipv4:" + a.address()], 0);
  EXPECT_GT(per_replica["ipv4:" + b.address()], 0);
  ClientRun t = Client("--target=" + a.address() + "," + b.address() +
                       " bench --seq-lens=8,16 --heads=2 "
                       "--head-dims=16 --dtypes=float32 --backends=cpu --warmup=1 --repeats=3");
  ASSERT_EQ(t.rc, 0) << t.err;
  EXPECT_NE(t.out.find("served by: "), std::string::npos) << t.out;
}

// ---- PNG decoding, enough for Chromium's screenshots: 8-bit RGB or RGBA, not interlaced. ----
struct Image {
  int width = 0, height = 0, channels = 0;
  std::vector<uint8_t> pixels;
};

uint32_t BigEndian32(const std::string& s, size_t at) {
  return (uint32_t{static_cast<uint8_t>(s[at])} << 24) |
         (uint32_t{static_cast<uint8_t>(s[at + 1])} << 16) |
         (uint32_t{static_cast<uint8_t>(s[at + 2])} << 8) |
         uint32_t{static_cast<uint8_t>(s[at + 3])};
}

bool DecodePng(const std::string& file, Image& img, std::string& why) {
  if (file.size() < 8 || file.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0)
    return why = "not a PNG", false;
  std::string idat;
  int depth = 0, color = 0, interlace = 0;
  for (size_t at = 8; at + 8 <= file.size();) {
    const uint32_t len = BigEndian32(file, at);
    const std::string type = file.substr(at + 4, 4);
    if (at + 12 + len > file.size()) return why = "truncated chunk", false;
    if (type == "IHDR") {
      img.width = static_cast<int>(BigEndian32(file, at + 8));
      img.height = static_cast<int>(BigEndian32(file, at + 12));
      depth = static_cast<uint8_t>(file[at + 16]);
      color = static_cast<uint8_t>(file[at + 17]);
      interlace = static_cast<uint8_t>(file[at + 20]);
    } else if (type == "IDAT") {
      idat += file.substr(at + 8, len);
    }
    at += 12 + len;
  }
  if (depth != 8 || (color != 2 && color != 6) || interlace != 0) {
    return why = absl::StrCat("PNG depth ", depth, " color type ", color, " interlace ", interlace),
           false;
  }
  img.channels = color == 6 ? 4 : 3;
  const size_t stride = static_cast<size_t>(img.width) * img.channels;
  std::vector<uint8_t> raw((stride + 1) * img.height);
  uLongf raw_len = raw.size();
  if (uncompress(raw.data(), &raw_len, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) !=
          Z_OK ||
      raw_len != raw.size()) {
    return why = "zlib could not inflate the image data", false;
  }
  img.pixels.assign(stride * img.height, 0);
  const int bpp = img.channels;
  for (int y = 0; y < img.height; ++y) {
    const uint8_t filter = raw[y * (stride + 1)];
    const uint8_t* in = &raw[y * (stride + 1) + 1];
    uint8_t* row = &img.pixels[y * stride];
    const uint8_t* up = y > 0 ? &img.pixels[(y - 1) * stride] : nullptr;
    for (size_t x = 0; x < stride; ++x) {
      const int a = x >= static_cast<size_t>(bpp) ? row[x - bpp] : 0;
      const int b = up ? up[x] : 0;
      const int c = up && x >= static_cast<size_t>(bpp) ? up[x - bpp] : 0;
      int pred = 0;
      switch (filter) {
        case 0:
          pred = 0;
          break;
        case 1:
          pred = a;
          break;
        case 2:
          pred = b;
          break;
        case 3:
          pred = (a + b) / 2;
          break;
        case 4: {
          const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
          pred = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
          break;
        }
        default:
          return why = absl::StrCat("PNG filter ", int{filter}), false;
      }
      row[x] = static_cast<uint8_t>(in[x] + pred);
    }
  }
  return true;
}

// Pixels within a small distance of `rgb` (anti-aliasing blends the edges of lines).
int CountColor(const Image& img, uint32_t rgb) {
  const int r = (rgb >> 16) & 0xff, g = (rgb >> 8) & 0xff, b = rgb & 0xff;
  int n = 0;
  for (size_t i = 0; i + 2 < img.pixels.size(); i += img.channels) {
    if (std::abs(img.pixels[i] - r) + std::abs(img.pixels[i + 1] - g) +
            std::abs(img.pixels[i + 2] - b) <
        24)
      ++n;
  }
  return n;
}

std::string FindChromium() {
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    if (std::system(absl::StrCat("command -v ", name, " >/dev/null 2>&1").c_str()) == 0)
      return name;
  }
  return "";
}

// The report of a real run, rendered by headless Chromium: the page loads and the charts'
// series colours (the first two: #0969da and #d1242f) are on screen.
TEST_F(ClientE2E, ReportRendersItsChartsInHeadlessChromium) {
  const std::string chromium = FindChromium();
  if (chromium.empty())
    GTEST_SKIP()
        << "chromium not installed (Debian package chromium; scripts/deps.sh --test installs it)";
  const std::string dir = ScratchDir() + "report_out";
  ClientRun r = Client(Target() +
                       " bench --seq-lens=16,32,64 --batch-sizes=1,2 --heads=2 --head-dims=16 "
                       "--dtypes=float32,bfloat16 --backends=cpu --warmup=1 --repeats=3 --out=" +
                       dir);
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string png = dir + "/report.png";
  const std::string cmd =
      absl::StrCat("timeout 120 ", chromium, " --headless --no-sandbox --disable-gpu ",
                   "--hide-scrollbars --window-size=1000,1600 --screenshot=", png, " file://", dir,
                   "/report.html >", dir, "/chromium.log 2>&1");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << ReadTextFile(dir + "/chromium.log");
  Image img;
  std::string why;
  ASSERT_TRUE(DecodePng(ReadTextFile(png), img, why)) << why;
  EXPECT_EQ(img.width, 1000);
  EXPECT_EQ(img.height, 1600);
  EXPECT_GT(CountColor(img, 0x0969da), 200) << "first series colour not drawn; see " << png;
  EXPECT_GT(CountColor(img, 0xd1242f), 200) << "second series colour not drawn; see " << png;
  // Mostly white page with dark text: a blank or error page has no near-black pixels.
  EXPECT_GT(CountColor(img, 0x1f2328), 500) << "no text on the page; see " << png;
}

// A tokens file of `lines` ("NAME SECRET [ROLE]" each) holding each secret's SHA-256 only, mode
// 0600 (attn-server refuses a tokens file others can read).
std::string WriteTokensFile(const std::string& dir, const std::vector<std::string>& lines) {
  mkdir(dir.c_str(), 0700);
  std::ofstream out(dir + "/tokens.txt");
  for (const std::string& line : lines) {
    std::vector<std::string> words = absl::StrSplit(line, ' ');
    FILE* p = popen(("printf %s " + words[1] + " | sha256sum | cut -d' ' -f1").c_str(), "r");
    char hex[80] = {};
    EXPECT_NE(fgets(hex, sizeof(hex), p), nullptr);
    pclose(p);
    words[1] = std::string(hex, 64);
    out << absl::StrJoin(words, " ") << "\n";
  }
  out.close();
  chmod((dir + "/tokens.txt").c_str(), 0600);
  return dir + "/tokens.txt";
}

// A cohort server (TLS, tokens) and the one-line errors a participant gets for each mistake:
// plaintext against TLS, an untrusted certificate, no token; then the right flags work and an
// error names the server's request id.
TEST(ClientIdentity, EachMistakeGetsAOneLineErrorSayingWhatToFix) {
  const std::string dir = ScratchDir() + "client_tls";
  if (auto why = ::attn::testing::MakeTestCertificates(dir); !why.empty()) GTEST_SKIP() << why;
  const std::string tokens = WriteTokensFile(dir, {"alice alice-secret"});
  ServerProcess server("tls", {"--tls_cert_file=" + dir + "/server.crt",
                               "--tls_key_file=" + dir + "/server.key", "--tokens_file=" + tokens});
  ASSERT_GT(server.port(), 0) << ReadTextFile(server.log());
  const std::string target = absl::StrCat("--target=localhost:", server.port(), " --timeout=10");
  const auto one_line = [](const ClientRun& r) { return r.err.find('\n') == r.err.size() - 1; };

  ClientRun plain = Client(target + " info");
  EXPECT_EQ(plain.rc, 1);
  EXPECT_NE(plain.err.find("does it speak TLS? (check --target; for a TLS server add --tls or "
                           "--tls_ca_file=CA.pem)"),
            std::string::npos)
      << plain.err;
  EXPECT_TRUE(one_line(plain)) << plain.err;

  ClientRun untrusted = Client(target + " --tls info");
  EXPECT_EQ(untrusted.rc, 1);
  EXPECT_NE(untrusted.err.find("the TLS handshake failed: give the CA that signed the server's "
                               "certificate with --tls_ca_file"),
            std::string::npos)
      << untrusted.err;
  EXPECT_TRUE(one_line(untrusted)) << untrusted.err;

  const std::string tls = target + " --tls_ca_file=" + dir + "/ca.crt";
  ClientRun no_token = Client(tls + " info");
  EXPECT_EQ(no_token.rc, 1);
  // Refused at the server's gate before its body was read: no request line, so no request id.
  EXPECT_NE(no_token.err.find("UNAUTHENTICATED: no token"), std::string::npos) << no_token.err;
  EXPECT_TRUE(one_line(no_token)) << no_token.err;

  setenv("ATTN_TOKEN", "alice-secret", 1);
  ClientRun ok = Client(tls + " info");
  // The cohort's notebook servers set $ATTN_TLS_CA_FILE: the CLI takes it as --tls_ca_file.
  setenv("ATTN_TLS_CA_FILE", (dir + "/ca.crt").c_str(), 1);
  ClientRun env_ca = Client(target + " info");
  unsetenv("ATTN_TLS_CA_FILE");
  unsetenv("ATTN_TOKEN");
  EXPECT_EQ(ok.rc, 0) << ok.err;
  EXPECT_EQ(env_ca.rc, 0) << env_ca.err;
  ClientRun flag = Client(tls + " --token=alice-secret info");
  EXPECT_EQ(flag.rc, 0) << flag.err;
}

// A suite a participant may not run is refused once: one call reaches the server (its log has
// one RunBenchmark line, so one refusal in its metrics), and the client says so in one line,
// even with several calls allowed at once; not a PERMISSION_DENIED per case of the suite.
TEST(ClientRefusal, ASuiteTheParticipantMayNotRunIsRefusedOnce) {
  const std::string tokens =
      WriteTokensFile(ScratchDir() + "client_refusal", {"bob bob-secret participant"});
  ServerProcess server("refusal", {"--tokens_file=" + tokens});
  ASSERT_GT(server.port(), 0) << ReadTextFile(server.log());
  ClientRun r = Client("--target=" + server.address() +
                       " --token=bob-secret bench --suite=large --parallel=4");
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_NE(r.err.find("attn-client: the server refused the job: PERMISSION_DENIED: bob: the "
                       "large suite is for admins"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.out, "");
  const std::string log = ReadTextFile(server.log());
  size_t calls = 0;
  for (size_t at = 0; (at = log.find("rpc=RunBenchmark", at)) != std::string::npos; ++at) ++calls;
  EXPECT_EQ(calls, 1u) << log;
}

// A token copied from a chat brings a newline, a space or a non-breaking space along: a clear
// error naming the character and where it is, before any call; never a crash.
TEST_F(ClientE2E, AMalformedTokenIsAClearErrorNotACrash) {
  struct Case {
    const char* token;
    bool from_env;
    const char* expected;
  };
  for (const Case& c :
       {Case{"attn_abc\n", true, "$ATTN_TOKEN: has a newline at the end (byte 9 of 9)"},
        Case{"attn_a\xc2\xa0"
             "b",
             false, "--token: has the non-ASCII character U+00A0 at position 7"},
        Case{"attn_a b", false, "--token: has a space at position 7"},
        Case{"attn_\x01"
             "b",
             true, "$ATTN_TOKEN: has the control character U+0001 at position 6"}}) {
    if (c.from_env) setenv("ATTN_TOKEN", c.token, 1);
    const std::string flag = c.from_env ? "" : absl::StrCat(" --token='", c.token, "'");
    ClientRun r = Client(Target() + flag + " health");
    unsetenv("ATTN_TOKEN");
    EXPECT_EQ(r.rc, 2) << c.expected << ": " << r.err;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("a token is visible ASCII only"), std::string::npos) << r.err;
  }
}

// A token crosses a plaintext channel only to this machine, unless --insecure_token says so.
TEST_F(ClientE2E, NoTokenInPlaintextToATargetThatIsNotLoopback) {
  ClientRun remote = Client("--target=10.255.255.1:50051 --timeout=2 --token=attn_x health");
  EXPECT_EQ(remote.rc, 2) << remote.err;
  EXPECT_NE(remote.err.find("refusing to send the token in plaintext to 10.255.255.1:50051: it is "
                            "not loopback"),
            std::string::npos)
      << remote.err;
  EXPECT_NE(remote.err.find("--insecure_token"), std::string::npos) << remote.err;
  ClientRun told =
      Client("--target=10.255.255.1:50051 --timeout=2 --token=attn_x --insecure_token health");
  EXPECT_EQ(told.err.find("refusing"), std::string::npos) << told.err;
  for (const std::string& target : {server_->address(), absl::StrCat("localhost:", server_->port()),
                                    absl::StrCat("dns:///localhost:", server_->port())}) {
    ClientRun local = Client("--target=" + target + " --token=attn_x health");
    EXPECT_EQ(local.rc, 0) << target << ": " << local.err;
  }
}

// results.json and report.html are shared; the command line they record has no token.
TEST_F(ClientE2E, TheRecordedCommandLineNeverCarriesTheToken) {
  const std::string dir = ScratchDir() + "bench_token";
  ClientRun r = Client(Target() +
                       " --token=attn_TOKENINFLAGFORM bench --seq-lens=16 --heads=1 --head-dims=16 "
                       "--dtypes=float32 --backends=cpu --warmup=0 --repeats=1 --out=" +
                       dir);
  ASSERT_EQ(r.rc, 0) << r.err;
  ClientRun spaced = Client(Target() +
                            " --token attn_TOKENINWORDFORM bench --seq-lens=16 --heads=1 "
                            "--head-dims=16 --dtypes=float32 --backends=cpu --warmup=0 "
                            "--repeats=1 --out=" +
                            dir + "2");
  ASSERT_EQ(spaced.rc, 0) << spaced.err;
  for (const std::string& file : {dir + "/results.json", dir + "/report.html", dir + "/results.csv",
                                  dir + "2/results.json", dir + "2/report.html"}) {
    const std::string text = ReadTextFile(file);
    EXPECT_EQ(text.find("TOKENIN"), std::string::npos) << file << " holds the token";
    if (file.find("results.json") != std::string::npos) {
      EXPECT_NE(text.find("<redacted>"), std::string::npos) << file;
      EXPECT_NE(text.find("--seq-lens=16"), std::string::npos) << file;
    }
  }
}

// An upload over the server's --max_request_mib is refused here, before it is sent.
TEST(ClientLimits, AnUploadOverTheServersLimitIsRefusedBeforeSending) {
  ServerProcess server("limit",
                       {"--max_request_mib=1", "--max_host_mib=64", "--grpc_memory_mib=64"});
  ASSERT_GT(server.port(), 0) << ReadTextFile(server.log());
  // q, k and v of (1, 1024, 4, 64) float32: 1 MiB each, 3 MiB in all.
  NpyArray a;
  a.type = NpyType::kFloat32;
  a.shape = {1, 1024, 4, 64};
  a.data.assign(static_cast<size_t>(a.element_count()) * 4, '\0');
  const std::string dir = ScratchDir();
  for (const char* n : {"q", "k", "v"})
    ASSERT_TRUE(WriteNpyFile(dir + "/big_" + n + ".npy", a).ok());
  const auto start = std::chrono::steady_clock::now();
  ClientRun r =
      Client(absl::StrCat("--target=", server.address(), " attend --dtype=float32 --q=", dir,
                          "/big_q.npy --k=", dir, "/big_k.npy --v=", dir, "/big_v.npy"));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("attend: q + k + v would be 3.0 MiB, over the server's limit of 1 MiB (its "
                       "--max_request_mib)"),
            std::string::npos)
      << r.err;
  EXPECT_LT(s, 5.0);
  const std::string log = ReadTextFile(server.log());
  EXPECT_TRUE(log.find("rpc=Attend") == std::string::npos &&
              log.find("rpc=\"Attend\"") == std::string::npos)
      << "the Attend reached the server: " << log;
}

}  // namespace
}  // namespace attn::client
