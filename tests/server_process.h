// A real attn-server process for the server's and the client's end-to-end tests: started on a
// loopback port the kernel picks, its port read from the SERVING line, killed on destruction.
//
// ctest runs every test in its own process, several at once, so everything a test writes lives
// in ScratchDir(), which is private to the process; a shared file name would let one test read
// another's server log and talk to a server that is about to be killed.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/loopback.h"

namespace attn::testing {

// The build's path to a binary, or the environment's override (for a copied bundle).
inline std::string BinaryPath(const char* env, const char* built) {
  const char* v = std::getenv(env);
  return v != nullptr ? v : built;
}

inline std::string ReadTextFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::string ScratchDirPath() {
  return ::testing::TempDir() + "attn_test." + std::to_string(getpid()) + "/";
}

// At exit, ScratchDir() goes when every test of the process passed; a failed test's logs stay
// for whoever reads its failure (ctest runs a process a test, so a full run made a thousand).
inline void RemoveScratchDirIfPassed() {
  const ::testing::UnitTest* run = ::testing::UnitTest::GetInstance();
  if (run != nullptr && run->Passed()) {
    std::error_code ignored;
    std::filesystem::remove_all(ScratchDirPath(), ignored);
  }
}

// A directory of this test process's own, created on first use; ends with '/'.
inline const std::string& ScratchDir() {
  static const std::string dir = [] {
    const std::string d = ScratchDirPath();
    mkdir(d.c_str(), 0700);
    std::atexit(RemoveScratchDirIfPassed);
    return d;
  }();
  return dir;
}

// GET `path` over HTTP/1.0 from 127.0.0.1:`port`: the whole response, headers included; empty
// when nothing listens.
inline std::string HttpGet(int port, const std::string& path) {
  const int fd = ::attn::loopback::ConnectTcp(port);
  if (fd < 0) return "";
  const std::string req = "GET " + path + " HTTP/1.0\r\n\r\n";
  send(fd, req.data(), req.size(), 0);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof(buf), 0)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

class ServerProcess {
 public:
  // attn-server --devices=cpu on 127.0.0.1:0 with `extra_flags` appended; `name` tells the logs
  // of several servers in one test apart.
  explicit ServerProcess(const std::string& name, std::vector<std::string> extra_flags = {}) {
    log_ = ScratchDir() + "server_" + name + ".log";
    const std::string binary = BinaryPath("ATTN_SERVER_BINARY", ATTN_SERVER_BINARY);
    std::vector<std::string> argv = {binary, "--listen_address=127.0.0.1:0",
                                     "--metrics_address=", "--devices=cpu", "--arena_mib=256"};
    argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
    pid_ = fork();
    if (pid_ == 0) {
      std::vector<char*> cargv;
      for (auto& a : argv) cargv.push_back(a.data());
      cargv.push_back(nullptr);
      if (freopen(log_.c_str(), "w", stdout) == nullptr) _exit(126);
      dup2(fileno(stdout), 2);
      execv(binary.c_str(), cargv.data());
      _exit(127);
    }
    const std::regex serving("SERVING listen=\"127.0.0.1:0 \\(port ([0-9]+)\\)");
    const std::regex metrics("metrics=\"127.0.0.1:0 \\(port ([0-9]+)\\)\"");
    for (int i = 0; i < 400 && port_ == 0 && pid_ > 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
      std::smatch m;
      const std::string text = ReadTextFile(log_);
      if (std::regex_search(text, m, serving)) port_ = std::stoi(m[1]);
      if (std::regex_search(text, m, metrics)) metrics_port_ = std::stoi(m[1]);
      // A server that refused to start: stop waiting (exit_status() says how it ended).
      if (port_ == 0 && waitpid(pid_, &exit_status_, WNOHANG) == pid_) pid_ = -1;
    }
  }
  ~ServerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // 0 when no SERVING line appeared within 10 s, or the process exited first; log() then says
  // why.
  int port() const { return port_; }
  // The /metrics port of a server given --metrics_address=127.0.0.1:0; 0 otherwise.
  int metrics_port() const { return metrics_port_; }
  // The waitpid status of a server that exited before serving; -1 otherwise.
  int exit_status() const { return exit_status_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  const std::string& log() const { return log_; }

  bool Signal(int sig) const { return pid_ > 0 && kill(pid_, sig) == 0; }
  // The process id while it runs; -1 once waited for.
  pid_t pid() const { return pid_; }
  // True while the process has not exited.
  bool Running() const { return pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == 0; }
  // Waits for the process to exit and returns its waitpid status; -1 if there is none.
  int Wait() {
    int status = -1;
    if (pid_ > 0 && waitpid(pid_, &status, 0) == pid_) pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int metrics_port_ = 0;
  int exit_status_ = -1;
  std::string log_;
};

}  // namespace attn::testing
