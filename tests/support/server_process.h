// Runs the real `eaglet serve` binary on a free loopback port for a test.
#pragma once
#include <string>

namespace eaglet::test {

class ServerProcess {
 public:
  // `args` are appended to `eaglet serve --host 127.0.0.1 --port P`; `shell` runs first in the
  // same shell (e.g. "ulimit -n 256;" or "export EAGLET_CRASH_AT=...;").
  explicit ServerProcess(const std::string& args, const std::string& shell = "");
  ~ServerProcess();
  int port() const { return port_; }
  int pid() const { return pid_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  bool ready() const { return ready_; }
  // SIGTERM and wait (up to 60 s); returns the exit status.
  int terminate();
  // SIGKILL (a crash) and reap, quietly; returns the exit status (137 unless it had ended).
  int kill();
  const std::string& log_path() const { return log_; }

 private:
  int pid_ = -1, port_ = 0;
  bool ready_ = false;
  std::string log_;
};

}  // namespace eaglet::test
