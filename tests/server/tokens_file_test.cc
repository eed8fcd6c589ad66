// The tokens file's rules (server/auth.h): overrides no call could run under refused with the
// line; a changed file applied line by line, a bad line granting nothing; a file others can read
// refused, at start and on a change, through a Secret volume's symlinks too; every failure logged
// once, counted and exported to /metrics.
#include <spdlog/sinks/ostream_sink.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/auth.h"
#include "server/metrics.h"
#include "server/server.h"
#include "server/server_helpers.h"
#include "server/tokens_file_helpers.h"
#include "server_process.h"  // ScratchDir

namespace attn::server {
namespace {
using ::attn::testing::Hex;
using ::attn::testing::ScratchDir;
using ::attn::testing::TokensLine;
using ::attn::testing::WriteTokensFile;

// Waits up to 5 s for `done`.
bool Eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 250; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

bool Admits(const TokenRegistry& r, const std::string& token) {
  return r.Authenticate("Bearer " + token).ok();
}

// The server's log lines while it lives (spdlog's default logger, restored after).
class CapturedLog {
 public:
  CapturedLog() : previous_(spdlog::default_logger()) {
    spdlog::set_default_logger(std::make_shared<spdlog::logger>(
        "captured", std::make_shared<spdlog::sinks::ostream_sink_mt>(text_)));
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  int Count(const std::string& what) const {
    const std::string all = text_.str();
    int n = 0;
    for (size_t at = all.find(what); at != std::string::npos; at = all.find(what, at + 1)) ++n;
    return n;
  }

 private:
  std::ostringstream text_;
  std::shared_ptr<spdlog::logger> previous_;
};

TEST(TokensFile, RulesNameTheLine) {
  ParticipantLimits defaults;
  const std::string h = Hex(Sha256("x"));
  const std::pair<std::string, std::string> bad[] = {
      {"alice\n", "line 1: expected NAME SHA256_HEX"},
      {"al!ce " + h + "\n", "line 1: name 'al!ce'"},
      {"# c\nalice zz\n", "line 2: alice: the token's SHA-256 must be 64 hex digits"},
      {"a " + h + "\nb " + h + "\n", "line 2: b: the same token hash as line 1"},
      {"a " + h + "\na " + Hex(Sha256("y")) + "\n", "line 2: name 'a' also on line 1"},
      {"a " + h + " root\n", "line 1: a: role 'root' is not participant or admin"},
      {"a " + h + " max_inflight=x\n", "line 1: a: max_inflight: 'x' is not a number"},
      {"a " + h + " admin speed=1\n", "line 1: a: unknown key 'speed'"},
      {"a " + h + " max_jobs=1 max_jobs=2\n", "line 1: a: max_jobs given twice"},
      // Overrides no call could run under.
      {"bob " + h + " participant max_running=0\n",
       "line 1: bob: max_running=0: must be a whole number from 1 to 1e9 (at 0 this "
       "participant's calls could never run; leave the key out for the server's "
       "--participant_max_running)"},
      {"a " + h + " max_inflight=-1\n", "line 1: a: max_inflight=-1: must be a whole number"},
      {"a " + h + " max_queued=0\n", "line 1: a: max_queued=0: must be a whole number"},
      {"a " + h + " max_jobs=0\n", "line 1: a: max_jobs=0: must be a whole number"},
      {"a " + h + " max_running=1.5\n", "line 1: a: max_running=1.5: must be a whole number"},
      {"a " + h + " max_running=inf\n", "line 1: a: max_running: 'inf' is not a number"},
      {"a " + h + " device_seconds=0\n",
       "line 1: a: device_seconds=0: must be more than 0 and at most 1e9 seconds"},
      {"a " + h + " max_job_seconds=-5\n", "line 1: a: max_job_seconds=-5: must be more than 0"},
      // A name quoted in a message is cut short and escaped (the message goes to the log).
      {std::string(100, 'n') + "\x1b " + h + "\n",
       "line 1: name '" + std::string(48, 'n') + "'... (101 bytes): 1-64 of"},
      {"a\x1b " + h + "\n", "line 1: name 'a\\x1b': 1-64 of"},
      {"a " + h + " max_running=0000000000000000000000000000000000000000000000000000000001.5\n",
       "line 1: a: max_running=1.5: must be a whole number"},
  };
  for (const auto& [text, message] : bad) {
    TokensFile parsed = ParseTokensFile(text, defaults);
    ASSERT_EQ(parsed.errors.size(), 1u) << text;
    EXPECT_NE(parsed.errors[0].find(message), std::string::npos) << parsed.errors[0];
    EXPECT_TRUE(parsed.participants.empty()) << text;
  }
  TokensFile ok =
      ParseTokensFile("# the cohort\n\nalice " + h + "   # her\nroot " + Hex(Sha256("r")) +
                          " admin max_jobs=9 device_seconds=1.5 max_running=2\n",
                      defaults);
  ASSERT_TRUE(ok.errors.empty()) << ok.errors[0];
  ASSERT_EQ(ok.participants.size(), 2u);
  EXPECT_EQ(ok.participants[0].role, Role::kParticipant);
  EXPECT_EQ(ok.participants[1].role, Role::kAdmin);
  EXPECT_EQ(ok.participants[1].limits.max_jobs, 9);
  EXPECT_EQ(ok.participants[1].limits.max_running, 2);
  EXPECT_EQ(ok.participants[1].limits.device_seconds, 1.5);
  EXPECT_EQ(ok.participants[1].limits.max_inflight, defaults.max_inflight);
}

TEST(TokensFile, ABadLineGrantsNothingNorDoesAnyLineWithItsNameOrHash) {
  const std::string text =
      TokensLine("alice", "a") +                              // 1: good
      TokensLine("bob", "b", "max_running=0") +               // 2: bad
      TokensLine("carol", "c") + TokensLine("carol", "c2") +  // 3, 4: one name twice
      TokensLine("dave", "d") + TokensLine("erin", "d") +     // 5, 6: one token twice
      TokensLine("bob", "b2") +                               // 7: good, but bob's line 2 is bad
      TokensLine("frank", "b", "max_jobs=2");                 // 8: good, but the hash of bad line 2
  TokensFile parsed = ParseTokensFile(text, ParticipantLimits{});
  ASSERT_EQ(parsed.participants.size(), 1u);
  EXPECT_EQ(parsed.participants[0].name, "alice");
  ASSERT_EQ(parsed.errors.size(), 5u);
  EXPECT_EQ(parsed.errors[0].rfind("line 2: bob: max_running=0", 0), 0u) << parsed.errors[0];
  EXPECT_EQ(parsed.errors[1], "line 4: name 'carol' also on line 3");
  EXPECT_EQ(parsed.errors[2], "line 6: erin: the same token hash as line 5");
  EXPECT_EQ(parsed.errors[3], "line 7: name 'bob' also on line 2");
  EXPECT_EQ(parsed.errors[4], "line 8: frank: the same token hash as line 2");
}

// Today's bug: `bob <hash> participant max_running=0` was accepted, and bob's calls then waited
// for their deadline (no worker takes them). The server now refuses to start, naming the line.
TEST(TokensFile, AZeroOverrideStopsTheServerNamingTheLine) {
  const std::string path = ScratchDir() + "zero_override_tokens.txt";
  WriteTokensFile(path,
                  TokensLine("alice", "a") + TokensLine("bob", "b", "participant max_running=0"));
  ServerOptions o = ::attn::testing::CpuOptions();
  o.tokens_file = path;
  auto server = Server::Start(o);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(server.status().message().find(absl::StrCat("--tokens_file '", path,
                                                        "': line 2: bob: max_running=0: must be "
                                                        "a whole number from 1 to 1e9")),
            std::string::npos)
      << server.status();
}

TEST(TokensFile, AFileOthersCanReadOrTheGroupWriteIsRefusedSayingHowToFix) {
  const std::string path = ScratchDir() + "mode_tokens.txt";
  const std::pair<mode_t, std::string> refused[] = {
      {0644,
       "mode 0644: others can read it, and it holds the participants' token hashes; "
       "`chmod 600 " +
           path + "`"},
      {0604, "mode 0604: others can read it"},
      {0602, "mode 0602: others can write it"},
      {0660, "mode 0660: its group can write it"},
      {0666, "mode 0666: others can read it, others can write it, its group can write it"},
  };
  for (const auto& [mode, message] : refused) {
    WriteTokensFile(path, TokensLine("alice", "a"), mode);
    auto r = TokenRegistry::Open(path, ParticipantLimits{});
    ASSERT_FALSE(r.ok()) << std::oct << mode;
    EXPECT_NE(r.status().message().find(message), std::string::npos) << r.status();
  }
  // Owner only, and group read (a Kubernetes Secret's defaultMode 0440 with fsGroup).
  for (mode_t mode : {0600, 0400, 0640, 0440}) {
    WriteTokensFile(path, TokensLine("alice", "a"), mode);
    auto r = TokenRegistry::Open(path, ParticipantLimits{});
    ASSERT_TRUE(r.ok()) << std::oct << mode << " " << r.status();
    EXPECT_TRUE(Admits(**r, "a"));
  }
  // Not a regular file; over 1 MiB.
  auto dir = TokenRegistry::Open(ScratchDir(), ParticipantLimits{});
  EXPECT_NE(dir.status().message().find("not a regular file"), std::string::npos) << dir.status();
  WriteTokensFile(path, std::string((1 << 20) + 1, '#'));
  auto big = TokenRegistry::Open(path, ParticipantLimits{});
  EXPECT_NE(big.status().message().find("1048577 bytes; a tokens file is at most 1048576"),
            std::string::npos)
      << big.status();
}

// The kubelet's layout of a Secret volume: tokens.txt -> ..data/tokens.txt, ..data -> a
// timestamped folder holding the file. The mode that counts is the file's, not the symlinks'
// (lstat says 0777 for them).
TEST(TokensFile, ThroughASecretVolumesSymlinksTheFilesOwnModeCounts) {
  const std::string dir = ScratchDir() + "secret_volume";
  mkdir(dir.c_str(), 0755);
  mkdir((dir + "/..2026_01_01_00_00_00.1").c_str(), 0755);
  WriteTokensFile(dir + "/..2026_01_01_00_00_00.1/tokens.txt", TokensLine("alice", "a"), 0440);
  symlink("..2026_01_01_00_00_00.1", (dir + "/..data").c_str());
  symlink("..data/tokens.txt", (dir + "/tokens.txt").c_str());
  auto r = TokenRegistry::Open(dir + "/tokens.txt", ParticipantLimits{});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(Admits(**r, "a"));
  chmod((dir + "/..2026_01_01_00_00_00.1/tokens.txt").c_str(), 0444);
  auto open = TokenRegistry::Open(dir + "/tokens.txt", ParticipantLimits{});
  EXPECT_NE(open.status().message().find("mode 0444: others can read it"), std::string::npos)
      << open.status();
}

// A change: the good lines apply, the bad line's participant loses access, the failure is logged
// once and counted however many polls see it, and the last good load's time stops advancing
// until the file is fixed. A file that cannot be read, or whose mode is wrong, changes nothing.
TEST(TokenRegistry, AChangeAppliesItsGoodLinesAndAFailureIsLoggedOnceAndExported) {
  CapturedLog log;
  const std::string path = ScratchDir() + "reload_tokens.txt";
  WriteTokensFile(path, TokensLine("alice", "a") + TokensLine("bob", "b"));
  auto opened = TokenRegistry::Open(path, ParticipantLimits{}, /*poll_s=*/0.02);
  ASSERT_TRUE(opened.ok()) << opened.status();
  const TokenRegistry& r = **opened;
  Metrics metrics({}, "test", "none", "none");
  metrics.ObserveTokensFile(&r);
  const auto exported = [&](const std::string& sample) {
    return metrics.Render().find(sample) != std::string::npos;
  };
  EXPECT_TRUE(
      exported("# TYPE attn_tokens_file_load_failures_total counter\n"
               "attn_tokens_file_load_failures_total 0\n"));
  EXPECT_TRUE(exported("# TYPE attn_tokens_file_last_good_load_timestamp_seconds gauge\n"));
  const double start = r.last_good_load_unix();
  EXPECT_NEAR(
      start,
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(),
      5);
  ASSERT_TRUE(Eventually([&] { return r.last_good_load_unix() > start; }))
      << "a good file's every read is a good load";

  WriteTokensFile(path, TokensLine("alice", "a") + TokensLine("bob", "b", "max_running=0") +
                            TokensLine("carol", "c"));
  ASSERT_TRUE(Eventually([&] { return Admits(r, "c"); })) << "carol's good line applies";
  EXPECT_TRUE(Admits(r, "a"));
  EXPECT_FALSE(Admits(r, "b")) << "bob's bad line grants nothing";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // ~15 polls of the same file
  const double stale = r.last_good_load_unix();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(r.last_good_load_unix(), stale);
  EXPECT_EQ(r.load_failures(), 1u);
  EXPECT_TRUE(exported("attn_tokens_file_load_failures_total 1\n"));
  EXPECT_EQ(log.Count("tokens file has lines that break a rule"), 1);
  EXPECT_EQ(log.Count("line 2: bob: max_running=0"), 1);

  // Fixed: bob back, the time advances again.
  WriteTokensFile(path, TokensLine("alice", "a") + TokensLine("bob", "b", "max_running=2") +
                            TokensLine("carol", "c"));
  ASSERT_TRUE(Eventually([&] { return Admits(r, "b"); }));
  ASSERT_TRUE(Eventually([&] { return r.last_good_load_unix() > stale; }));
  EXPECT_EQ(log.Count("tokens file good again"), 1);

  // Readable by others: refused, nothing changes (alice stays, dave is not let in).
  WriteTokensFile(path, TokensLine("alice", "a") + TokensLine("dave", "d"), 0644);
  ASSERT_TRUE(Eventually([&] { return r.load_failures() == 2; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(r.load_failures(), 2u);
  EXPECT_TRUE(Admits(r, "a"));
  EXPECT_TRUE(Admits(r, "b"));
  EXPECT_FALSE(Admits(r, "d"));
  EXPECT_EQ(log.Count("mode 0644: others can read it"), 1);

  // Gone: the same.
  std::remove(path.c_str());
  ASSERT_TRUE(Eventually([&] { return r.load_failures() == 3; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(r.load_failures(), 3u);
  EXPECT_TRUE(Admits(r, "c"));
  EXPECT_EQ(log.Count("cannot read it: No such file or directory"), 1);
  EXPECT_EQ(log.Count("tokens file unusable; the participants stay as they were"), 2);
}

}  // namespace
}  // namespace attn::server
