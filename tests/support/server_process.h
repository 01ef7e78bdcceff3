// Runs the real `eaglet serve` binary on a free loopback port for a test.
#pragma once
#include <string>

namespace eaglet::test {

class ServerProcess {
 public:
  // `args` are appended to `eaglet serve --host 127.0.0.1 --port P`.
  explicit ServerProcess(const std::string& args);
  ~ServerProcess();
  int port() const { return port_; }
  int pid() const { return pid_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  bool ready() const { return ready_; }
  // SIGTERM and wait (up to 60 s); returns the exit status.
  int terminate();
  const std::string& log_path() const { return log_; }

 private:
  int pid_ = -1, port_ = 0;
  bool ready_ = false;
  std::string log_;
};

}  // namespace eaglet::test
