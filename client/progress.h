// Progress of a running benchmark job on stderr: a redrawn bar (cases done / total, the case
// running, ETA) when stderr is a terminal, one plain line per finished case otherwise (logs, CI).
#pragma once

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>

#include "client/report.h"

namespace attn::client {

class Progress {
 public:
  Progress(int total, bool terminal, std::FILE* out = stderr);

  void Started(const std::string& label);   // a case was sent
  void Finished(const CaseRecord& record);  // a case came back
  void Note(const std::string& line);       // a line that must not be drawn over
  void Close();                             // clears the bar

 private:
  void Draw();  // with mu_ held

  const int total_;
  const bool terminal_;
  std::FILE* out_;
  std::mutex mu_;
  int done_ = 0;
  std::string current_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace attn::client
