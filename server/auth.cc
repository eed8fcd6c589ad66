#include "server/auth.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/log.h"
#include "server/text.h"

namespace attn::server {
namespace {

bool ParseHex(absl::string_view hex, std::array<uint8_t, 32>& out) {
  if (hex.size() != 64) return false;
  for (size_t i = 0; i < 32; ++i) {
    int v = 0;
    for (char c : hex.substr(2 * i, 2)) {
      const int d = absl::ascii_isdigit(static_cast<unsigned char>(c)) ? c - '0'
                    : (c >= 'a' && c <= 'f')                           ? c - 'a' + 10
                    : (c >= 'A' && c <= 'F')                           ? c - 'A' + 10
                                                                       : -1;
      if (d < 0) return false;
      v = v * 16 + d;
    }
    out[i] = static_cast<uint8_t>(v);
  }
  return true;
}

constexpr size_t kMaxFileBytes = size_t{1} << 20;  // ~5000 participants' lines
constexpr size_t kMaxErrorsReported = 5;           // a log line names these bad lines, at most

// Applies one key=value quota override: counts are whole numbers >= 1, seconds are > 0.
absl::Status SetLimit(ParticipantLimits& l, absl::string_view key, absl::string_view value) {
  int* count = key == "max_inflight"  ? &l.max_inflight
               : key == "max_queued"  ? &l.max_queued
               : key == "max_jobs"    ? &l.max_jobs
               : key == "max_running" ? &l.max_running
                                      : nullptr;
  double* seconds = key == "device_seconds"    ? &l.device_seconds
                    : key == "max_job_seconds" ? &l.max_job_seconds
                                               : nullptr;
  if (count == nullptr && seconds == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("unknown key %s; expected max_inflight, max_queued, max_jobs, max_running, "
                        "device_seconds or max_job_seconds",
                        Quoted(key)));
  }
  double x = 0;
  if (!absl::SimpleAtod(value, &x) || !std::isfinite(x)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %s is not a number", key, Quoted(value)));
  }
  if (count != nullptr) {
    if (x < 1 || x > 1e9 || x != std::floor(x)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s=%s: must be a whole number from 1 to 1e9 (at 0 this participant's calls could "
          "never run; leave the key out for the server's --participant_%s)",
          key, absl::StrCat(x), key));
    }
    *count = static_cast<int>(x);
  } else {
    if (!(x > 0) || x > 1e9) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s=%s: must be more than 0 and at most 1e9 seconds (leave the key out for the "
          "server's --participant_%s)",
          key, absl::StrCat(x), key));
    }
    *seconds = x;
  }
  return absl::OkStatus();
}

// One line's reading: what it grants, or why it grants nothing; its name and token hash when
// they could be read (a bad line taints other lines with either).
struct Line {
  int number = 0;
  Participant participant;
  std::string error;
  bool has_name = false;
  bool has_hash = false;
};

Line ParseLine(int number, absl::string_view text, const ParticipantLimits& defaults) {
  Line line;
  line.number = number;
  std::vector<absl::string_view> words =
      absl::StrSplit(text, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
  Participant& p = line.participant;
  p.limits = defaults;
  if (words.size() < 2) {
    line.error = "expected NAME SHA256_HEX [ROLE] [key=value ...]";
    return line;
  }
  if (!IsName(words[0], 64)) {
    line.error = absl::StrFormat("name %s: 1-64 of A-Z a-z 0-9 . _ -", Quoted(words[0]));
    return line;
  }
  p.name = std::string(words[0]);
  line.has_name = true;
  if (!ParseHex(words[1], p.token_sha256)) {
    line.error = absl::StrFormat(
        "%s: the token's SHA-256 must be 64 hex digits (never the token itself)", p.name);
    return line;
  }
  line.has_hash = true;
  size_t next = 2;
  if (words.size() > 2 && !absl::StrContains(words[2], '=')) {
    if (words[2] == "admin") {
      p.role = Role::kAdmin;
    } else if (words[2] != "participant") {
      line.error =
          absl::StrFormat("%s: role %s is not participant or admin", p.name, Quoted(words[2]));
      return line;
    }
    next = 3;
  }
  std::set<absl::string_view> keys;
  for (; next < words.size(); ++next) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(words[next], absl::MaxSplits('=', 1));
    absl::Status s = keys.insert(kv.first).second
                         ? SetLimit(p.limits, kv.first, kv.second)
                         : absl::InvalidArgumentError(absl::StrFormat("%s given twice", kv.first));
    if (!s.ok()) {
      line.error = absl::StrFormat("%s: %s", p.name, s.message());
      return line;
    }
  }
  return line;
}

// The first kMaxErrorsReported of `errors`, joined, and how many more there are.
std::string Summary(const std::vector<std::string>& errors) {
  const size_t shown = std::min(errors.size(), kMaxErrorsReported);
  std::string out = absl::StrJoin(errors.begin(), errors.begin() + shown, "; ");
  if (errors.size() > shown) absl::StrAppend(&out, "; and ", errors.size() - shown, " more lines");
  return out;
}

double UnixNow() { return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()); }

}  // namespace

std::array<uint8_t, 32> Sha256(absl::string_view data) {
  std::array<uint8_t, 32> out{};
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), out.data());
  return out;
}

TokensFile ParseTokensFile(absl::string_view text, const ParticipantLimits& defaults) {
  std::vector<Line> lines;
  int number = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++number;
    if (const size_t hash = raw.find('#'); hash != absl::string_view::npos)
      raw = raw.substr(0, hash);
    if (absl::StripAsciiWhitespace(raw).empty()) continue;
    lines.push_back(ParseLine(number, raw, defaults));
  }
  // A name or a hash on two lines: which entry is meant is unknown, so neither grants anything.
  std::map<std::string, int> first_name;
  std::map<std::array<uint8_t, 32>, int> first_hash;
  for (Line& line : lines) {
    const Participant& p = line.participant;
    if (line.has_name) {
      const auto [it, fresh] = first_name.emplace(p.name, line.number);
      if (!fresh && line.error.empty())
        line.error = absl::StrFormat("name '%s' also on line %d", p.name, it->second);
    }
    if (line.has_hash) {
      const auto [it, fresh] = first_hash.emplace(p.token_sha256, line.number);
      if (!fresh && line.error.empty())
        line.error = absl::StrFormat("%s: the same token hash as line %d", p.name, it->second);
    }
  }
  std::set<std::string> tainted_names;
  std::set<std::array<uint8_t, 32>> tainted_hashes;
  TokensFile out;
  for (const Line& line : lines) {
    if (line.error.empty()) continue;
    out.errors.push_back(absl::StrFormat("line %d: %s", line.number, line.error));
    if (line.has_name) tainted_names.insert(line.participant.name);
    if (line.has_hash) tainted_hashes.insert(line.participant.token_sha256);
  }
  for (Line& line : lines) {
    const Participant& p = line.participant;
    if (line.error.empty() && !tainted_names.contains(p.name) &&
        !tainted_hashes.contains(p.token_sha256)) {
      out.participants.push_back(std::move(line.participant));
    }
  }
  return out;
}

absl::StatusOr<std::string> ReadTokensFile(const std::string& path) {
  const auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrFormat("--tokens_file '%s': %s", path, why));
  };
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return bad(absl::StrCat("cannot read it: ", std::strerror(errno)));
  // The file read is the file checked: fstat, not a second lookup by name (and not lstat: a
  // Secret volume's file is a symlink through ..data, and its target's mode is what counts).
  struct stat st {};
  std::string text;
  absl::Status status;
  if (fstat(fd, &st) != 0) {
    status = bad(absl::StrCat("cannot stat it: ", std::strerror(errno)));
  } else if (!S_ISREG(st.st_mode)) {
    status = bad("not a regular file");
  } else if ((st.st_mode & 027) != 0) {
    const mode_t m = st.st_mode & 0777;
    std::vector<std::string> who;
    if (m & 004) who.push_back("others can read it");
    if (m & 002) who.push_back("others can write it");
    if (m & 001) who.push_back("others can execute it");
    if (m & 020) who.push_back("its group can write it");
    status = bad(absl::StrFormat(
        "mode %04o: %s, and it holds the participants' token hashes; `chmod 600 %s` (at most "
        "0640: read and write for its owner, read for its group, as a Kubernetes Secret's "
        "defaultMode 0440 with fsGroup gives)",
        m, absl::StrJoin(who, ", "), path));
  } else if (static_cast<size_t>(st.st_size) > kMaxFileBytes) {
    status =
        bad(absl::StrFormat("%d bytes; a tokens file is at most %d", st.st_size, kMaxFileBytes));
  } else {
    char buf[8192];
    for (ssize_t n; (n = read(fd, buf, sizeof(buf))) != 0;) {
      if (n < 0) {
        if (errno == EINTR) continue;
        status = bad(absl::StrCat("cannot read it: ", std::strerror(errno)));
        break;
      }
      text.append(buf, static_cast<size_t>(n));
      if (text.size() > kMaxFileBytes) {
        status =
            bad(absl::StrFormat("over %d bytes; a tokens file is at most that", kMaxFileBytes));
        break;
      }
    }
  }
  close(fd);
  if (!status.ok()) return status;
  return text;
}

absl::StatusOr<std::unique_ptr<TokenRegistry>> TokenRegistry::Open(
    const std::string& path, const ParticipantLimits& defaults, double poll_s) {
  auto text = ReadTokensFile(path);
  if (!text.ok()) return text.status();
  TokensFile parsed = ParseTokensFile(*text, defaults);
  if (!parsed.errors.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--tokens_file '%s': %s", path, Summary(parsed.errors)));
  }
  std::unique_ptr<TokenRegistry> r(new TokenRegistry());
  r->path_ = path;
  r->defaults_ = defaults;
  r->applied_text_ = *std::move(text);
  const size_t count = parsed.participants.size();
  r->Install(std::move(parsed.participants));
  r->last_good_load_unix_ = UnixNow();
  Log(spdlog::level::info, "tokens file loaded",
      {{"path", path}, {"participants", absl::StrCat(count)}});
  r->watcher_ = std::thread([raw = r.get(), poll_s] { raw->Watch(poll_s); });
  return r;
}

TokenRegistry::~TokenRegistry() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

void TokenRegistry::Install(std::vector<Participant> participants) {
  auto list = std::make_shared<std::vector<std::shared_ptr<const Participant>>>();
  for (Participant& p : participants) {
    list->push_back(std::make_shared<const Participant>(std::move(p)));
  }
  std::lock_guard<std::mutex> lock(mu_);
  participants_ = std::move(list);
}

void TokenRegistry::Poll() {
  auto text = ReadTokensFile(path_);
  std::string failure;
  bool new_failure = false;
  if (!text.ok()) {
    failure = std::string(text.status().message());
    new_failure = failure != reported_failure_;
  } else if (*text != applied_text_) {
    TokensFile parsed = ParseTokensFile(*text, defaults_);
    const size_t count = parsed.participants.size();
    Install(std::move(parsed.participants));
    applied_text_ = *std::move(text);
    applied_errors_ = parsed.errors.empty() ? ""
                                            : absl::StrFormat("--tokens_file '%s': %s", path_,
                                                              Summary(parsed.errors));
    new_failure = !parsed.errors.empty();
    Log(spdlog::level::info, "tokens file changed; reloaded",
        {{"path", path_},
         {"participants", absl::StrCat(count)},
         {"bad_lines", absl::StrCat(parsed.errors.size())}});
  }
  if (failure.empty()) failure = applied_errors_;
  if (failure.empty()) {
    last_good_load_unix_ = UnixNow();
    if (!reported_failure_.empty()) {
      Log(spdlog::level::info, "tokens file good again", {{"path", path_}});
    }
  } else if (new_failure) {
    ++load_failures_;
    Log(spdlog::level::err,
        text.ok() ? "tokens file has lines that break a rule: they grant nothing, the other "
                    "lines apply"
                  : "tokens file unusable; the participants stay as they were",
        {{"error", failure}});
  }
  reported_failure_ = failure;
}

void TokenRegistry::Watch(double poll_s) {
  std::unique_lock<std::mutex> lock(stop_mu_);
  while (
      !stop_cv_.wait_for(lock, std::chrono::duration<double>(poll_s), [&] { return stopping_; })) {
    Poll();
  }
}

absl::StatusOr<std::shared_ptr<const Participant>> TokenRegistry::Authenticate(
    absl::string_view authorization) const {
  if (authorization.empty()) {
    return absl::UnauthenticatedError(
        "no token: this server needs 'authorization: Bearer TOKEN' (attn-client --token or "
        "$ATTN_TOKEN); ask the workshop host for yours");
  }
  constexpr absl::string_view kBearer = "Bearer ";
  if (!absl::StartsWithIgnoreCase(authorization, kBearer) ||
      authorization.size() == kBearer.size()) {
    return absl::UnauthenticatedError("the authorization header must be 'Bearer TOKEN'");
  }
  const auto presented = Sha256(authorization.substr(kBearer.size()));
  std::shared_ptr<const std::vector<std::shared_ptr<const Participant>>> list;
  {
    std::lock_guard<std::mutex> lock(mu_);
    list = participants_;
  }
  // Every entry is compared in full, so the time does not depend on which (if any) matches.
  std::shared_ptr<const Participant> found;
  for (const auto& p : *list) {
    const bool same =
        CRYPTO_memcmp(p->token_sha256.data(), presented.data(), presented.size()) == 0;
    if (same) found = p;
  }
  if (found == nullptr) {
    return absl::UnauthenticatedError(
        "unknown token: it matches no participant of this server (check for a typo, or ask the "
        "workshop host whether it was rotated)");
  }
  return found;
}

}  // namespace attn::server
