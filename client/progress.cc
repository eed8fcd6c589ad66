#include "client/progress.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/report_spec.h"
#include "proto/status.h"

namespace attn::client {

Progress::Progress(int total, bool terminal, std::FILE* out)
    : total_(total), terminal_(terminal), out_(out) {}

void Progress::Started(const std::string& label) {
  std::lock_guard<std::mutex> lock(mu_);
  current_ = label;
  if (terminal_) Draw();
}

void Progress::Finished(const CaseRecord& record) {
  std::lock_guard<std::mutex> lock(mu_);
  ++done_;
  const v1::CaseResult& r = record.result;
  if (terminal_) {
    Draw();
    return;
  }
  const std::string what =
      absl::StrCat(CaseLabel(record, "series"), " ", CaseLabel(record, "problem"));
  if (IsOk(r)) {
    absl::FPrintF(out_, "[%d/%d] ok %s: %s ms (%s)\n", done_, total_, what,
                  Format(r.stats().median_ms(), "ms"), r.hostname());
  } else {
    absl::FPrintF(out_, "[%d/%d] %s %s: %s\n", done_, total_, CodeName(StatusOf(r)), what,
                  r.message());
  }
  std::fflush(out_);
}

void Progress::Note(const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  absl::FPrintF(out_, "%s%s\n", terminal_ ? "\r\033[K" : "", line);
  if (terminal_) Draw();
}

void Progress::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  if (terminal_) absl::FPrintF(out_, "\r\033[K");
  std::fflush(out_);
}

void Progress::Draw() {
  constexpr int kWidth = 24;
  const int filled = total_ > 0 ? done_ * kWidth / total_ : kWidth;
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string eta = "--:--";
  if (done_ > 0 && done_ < total_) {
    const int s = static_cast<int>(elapsed / done_ * (total_ - done_) + 0.5);
    eta = absl::StrFormat("%d:%02d", s / 60, s % 60);
  } else if (done_ == total_) {
    eta = "0:00";
  }
  std::string current = done_ < total_ ? current_ : "";
  if (current.size() > 48) current = current.substr(0, 45) + "...";
  absl::FPrintF(out_, "\r\033[K[%s%s] %d/%d  ETA %s  %s", std::string(filled, '#'),
                std::string(kWidth - filled, '.'), done_, total_, eta, current);
  std::fflush(out_);
}

}  // namespace attn::client
