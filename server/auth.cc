#include "server/auth.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "server/log.h"

namespace attn::server {
namespace {

bool ValidName(absl::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

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

// Applies one key=value quota override.
absl::Status SetLimit(ParticipantLimits& l, absl::string_view key, absl::string_view value) {
  double x = 0;
  if (!absl::SimpleAtod(value, &x) || !(x >= 0) || x > 1e9) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: '%s' is not a number in [0, 1e9]", key, value));
  }
  const auto whole = [&](int& field) -> absl::Status {
    if (x != static_cast<int>(x)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: must be a whole number, got %s", key, value));
    }
    field = static_cast<int>(x);
    return absl::OkStatus();
  };
  if (key == "max_inflight") return whole(l.max_inflight);
  if (key == "max_queued") return whole(l.max_queued);
  if (key == "max_jobs") return whole(l.max_jobs);
  if (key == "max_running") return whole(l.max_running);
  if (key == "device_seconds") {
    l.device_seconds = x;
    return absl::OkStatus();
  }
  if (key == "max_job_seconds") {
    l.max_job_seconds = x;
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "unknown key '%s'; expected max_inflight, max_queued, max_jobs, device_seconds, "
      "max_job_seconds or max_running",
      key));
}

}  // namespace

std::array<uint8_t, 32> Sha256(absl::string_view data) {
  std::array<uint8_t, 32> out{};
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), out.data());
  return out;
}

absl::StatusOr<std::vector<Participant>> ParseTokensFile(absl::string_view text,
                                                         const ParticipantLimits& defaults) {
  std::vector<Participant> out;
  std::set<std::string> names;
  std::set<std::array<uint8_t, 32>> hashes;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    if (const size_t hash = line.find('#'); hash != absl::string_view::npos)
      line = line.substr(0, hash);
    std::vector<absl::string_view> words =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (words.empty()) continue;
    const auto bad = [&](const std::string& rule) {
      return absl::InvalidArgumentError(absl::StrFormat("line %d: %s", number, rule));
    };
    if (words.size() < 2) return bad("expected NAME SHA256_HEX [ROLE] [key=value ...]");
    Participant p;
    p.name = std::string(words[0]);
    p.limits = defaults;
    if (!ValidName(p.name))
      return bad(absl::StrFormat("name '%s': 1-64 of A-Z a-z 0-9 . _ -", p.name));
    if (!names.insert(p.name).second)
      return bad(absl::StrFormat("name '%s' appears twice", p.name));
    if (!ParseHex(words[1], p.token_sha256)) {
      return bad(absl::StrFormat(
          "%s: the token's SHA-256 must be 64 hex digits (never the token itself)", p.name));
    }
    if (!hashes.insert(p.token_sha256).second)
      return bad(absl::StrFormat("%s: the same token hash as an earlier line", p.name));
    size_t next = 2;
    if (words.size() > 2 && !absl::StrContains(words[2], '=')) {
      if (words[2] == "admin") {
        p.role = Role::kAdmin;
      } else if (words[2] != "participant") {
        return bad(absl::StrFormat("%s: role '%s' is not participant or admin", p.name, words[2]));
      }
      next = 3;
    }
    for (; next < words.size(); ++next) {
      std::pair<absl::string_view, absl::string_view> kv =
          absl::StrSplit(words[next], absl::MaxSplits('=', 1));
      if (auto s = SetLimit(p.limits, kv.first, kv.second); !s.ok()) {
        return bad(absl::StrFormat("%s: %s", p.name, s.message()));
      }
    }
    out.push_back(std::move(p));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<TokenRegistry>> TokenRegistry::Open(
    const std::string& path, const ParticipantLimits& defaults, double poll_s) {
  std::unique_ptr<TokenRegistry> r(new TokenRegistry());
  r->path_ = path;
  r->defaults_ = defaults;
  if (auto s = r->Reload(/*at_start=*/true); !s.ok()) return s;
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

absl::Status TokenRegistry::Reload(bool at_start) {
  std::ifstream f(path_, std::ios::binary);
  if (!f) {
    return absl::InvalidArgumentError(absl::StrFormat("--tokens_file: cannot read '%s'", path_));
  }
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  if (!at_start && text == last_text_) return absl::OkStatus();
  auto parsed = ParseTokensFile(text, defaults_);
  if (!parsed.ok()) {
    last_text_ = text;  // log a bad file once, not every poll
    return absl::InvalidArgumentError(
        absl::StrFormat("--tokens_file '%s': %s", path_, parsed.status().message()));
  }
  auto list = std::make_shared<std::vector<std::shared_ptr<const Participant>>>();
  for (Participant& p : *parsed) list->push_back(std::make_shared<const Participant>(std::move(p)));
  {
    std::lock_guard<std::mutex> lock(mu_);
    participants_ = std::move(list);
    last_text_ = text;
  }
  Log(spdlog::level::info, at_start ? "tokens file loaded" : "tokens file changed; reloaded",
      {{"path", path_}, {"participants", absl::StrFormat("%d", participants_->size())}});
  return absl::OkStatus();
}

void TokenRegistry::Watch(double poll_s) {
  std::unique_lock<std::mutex> lock(stop_mu_);
  while (
      !stop_cv_.wait_for(lock, std::chrono::duration<double>(poll_s), [&] { return stopping_; })) {
    if (absl::Status s = Reload(/*at_start=*/false); !s.ok()) {
      Log(spdlog::level::err, "tokens file not reloaded; keeping the last good one",
          {{"error", std::string(s.message())}});
    }
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
