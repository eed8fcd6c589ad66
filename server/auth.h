// Who is calling. With --tokens_file, every RPC but health carries `authorization: Bearer TOKEN`
// and the participant that token belongs to is the caller: the key of its quotas and fair share,
// and the name in logs and metrics. The server holds only SHA-256 hashes of the tokens.
//
// The tokens file, one participant per line ('#' starts a comment):
//   NAME SHA256_HEX_OF_TOKEN [ROLE] [key=value ...]
// NAME: 1-64 of [A-Za-z0-9._-], unique; ROLE: participant (default) or admin; key=value: this
// participant's quotas (max_inflight, max_queued, max_jobs, device_seconds, max_job_seconds,
// max_running), overriding the server's --participant_* flags.
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

// The participants of a tokens file's text, or InvalidArgument naming the line and the rule.
absl::StatusOr<std::vector<Participant>> ParseTokensFile(absl::string_view text,
                                                         const ParticipantLimits& defaults);

class TokenRegistry {
 public:
  // Loads `path` (an error if it cannot be read or parsed), then re-reads it every `poll_s`
  // when its content changed (a Kubernetes Secret update swaps the file): a good file replaces
  // the participants at once; a bad one is logged and the last good one kept.
  static absl::StatusOr<std::unique_ptr<TokenRegistry>> Open(const std::string& path,
                                                             const ParticipantLimits& defaults,
                                                             double poll_s = 2);
  ~TokenRegistry();

  // The participant whose token `authorization` ("Bearer TOKEN") carries, or UNAUTHENTICATED
  // saying what is missing. The token's hash is compared with every participant's in constant
  // time, so neither a match's position nor a near miss shows in the time taken.
  absl::StatusOr<std::shared_ptr<const Participant>> Authenticate(
      absl::string_view authorization) const;

 private:
  TokenRegistry() = default;
  absl::Status Reload(bool at_start);
  void Watch(double poll_s);

  std::string path_;
  ParticipantLimits defaults_;
  mutable std::mutex mu_;
  std::shared_ptr<const std::vector<std::shared_ptr<const Participant>>> participants_;
  std::string last_text_;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread watcher_;
};

}  // namespace attn::server
