// Who is calling. With --tokens_file, every RPC but health carries `authorization: Bearer TOKEN`
// and the participant that token belongs to is the caller: the key of its quotas and fair share,
// and the name in logs and metrics. The server holds only SHA-256 hashes of the tokens.
//
// The tokens file, one participant per line ('#' starts a comment):
//   NAME SHA256_HEX_OF_TOKEN [ROLE] [key=value ...]
// NAME: 1-64 of [A-Za-z0-9._-], unique; ROLE: participant (default) or admin; key=value: this
// participant's quotas, overriding the server's --participant_* flags: max_inflight, max_queued,
// max_jobs and max_running each a whole number >= 1, device_seconds and max_job_seconds each > 0
// (at 0 its calls could never run: leave the key out for the default).
// Each key at most once a line.
//
// The file itself: a regular file of at most 1 MiB that others cannot read or write and the group
// cannot write (mode & 027 == 0: 0600, or 0640/0440 as a Kubernetes Secret with fsGroup mounts
// it; `chmod 600 FILE` otherwise). At start-up a file that breaks any rule stops the server. When
// it changes, the lines that keep every rule take effect at once; a line that breaks one grants
// nothing, nor does any other line with its name or token hash (a participant whose line is wrong
// has no access until it is fixed: a mistyped revocation must not leave the old token working).
// A file that cannot be read, or whose mode is wrong, changes nothing. Either failure is logged
// once, counted (attn_tokens_file_load_failures_total) and stops
// attn_tokens_file_last_good_load_timestamp_seconds from advancing (the AttnTokensFileStale alert).
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace attn::server {

// A participant's quotas (the --participant_* flags, or its key=value overrides).
struct ParticipantLimits {
  int max_inflight = 16;         // Attends and benchmark jobs in flight at once
  int max_queued = 32;           // tasks waiting on the devices, a job's later cases included
  int max_jobs = 4;              // benchmark jobs alive at once
  double device_seconds = 300;   // time holding a device worker per rolling window
  double max_job_seconds = 180;  // estimated cost of one benchmark job
  int max_running = 1;           // tasks running at once on one device
};

enum class Role { kParticipant, kAdmin };

struct Participant {
  std::string name;
  Role role = Role::kParticipant;
  ParticipantLimits limits;
  std::array<uint8_t, 32> token_sha256{};
};

// SHA-256 of `data`.
std::array<uint8_t, 32> Sha256(absl::string_view data);

// A tokens file's text, parsed: the participants of the lines that keep every rule, and for each
// line that does not, "line N: the rule" (in line order).
struct TokensFile {
  std::vector<Participant> participants;
  std::vector<std::string> errors;
};
TokensFile ParseTokensFile(absl::string_view text, const ParticipantLimits& defaults);

// The text of the tokens file at `path` (symlinks followed, as in a Secret volume), or
// InvalidArgument naming the path and what is wrong: unreadable, not a regular file, over 1 MiB,
// or a mode that lets others read or write it or the group write it (with the chmod that fixes it).
absl::StatusOr<std::string> ReadTokensFile(const std::string& path);

class TokenRegistry {
 public:
  // Loads `path` (an error if it breaks any rule), then reads it every `poll_s`: a change takes
  // effect as the header says, and a failure is logged once, not at every poll.
  static absl::StatusOr<std::unique_ptr<TokenRegistry>> Open(const std::string& path,
                                                             const ParticipantLimits& defaults,
                                                             double poll_s = 2);
  ~TokenRegistry();

  // The participant whose token `authorization` ("Bearer TOKEN") carries, or UNAUTHENTICATED
  // saying what is missing. The token's hash is compared with every participant's in constant
  // time, so neither a match's position nor a near miss shows in the time taken.
  absl::StatusOr<std::shared_ptr<const Participant>> Authenticate(
      absl::string_view authorization) const;

  // Unix time of the last read that found the file keeping every rule (the metrics' gauge).
  double last_good_load_unix() const { return last_good_load_unix_.load(); }
  // Reads that failed: each new unreadable or wrong-mode state, each changed text with a bad line.
  uint64_t load_failures() const { return load_failures_.load(); }

 private:
  TokenRegistry() = default;
  // One poll: reads the file, applies a changed text, and logs and counts a new failure.
  void Poll();
  void Install(std::vector<Participant> participants);
  void Watch(double poll_s);

  std::string path_;
  ParticipantLimits defaults_;
  mutable std::mutex mu_;
  std::shared_ptr<const std::vector<std::shared_ptr<const Participant>>> participants_;
  // The watcher's state: the text last applied, its bad lines ("" when none), and the failure
  // last logged ("" while the file is good), so that a failure is reported once.
  std::string applied_text_;
  std::string applied_errors_;
  std::string reported_failure_;
  std::atomic<double> last_good_load_unix_{0};
  std::atomic<uint64_t> load_failures_{0};
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread watcher_;
};

}  // namespace attn::server
