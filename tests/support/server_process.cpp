#include "support/server_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <httplib.h>

#include "support/test_util.h"

namespace eaglet::test {

ServerProcess::ServerProcess(const std::string& args) {
  static int counter = 0;
  for (int attempt = 0; attempt < 5 && !ready_; ++attempt) {
    port_ = 21000 + (::getpid() * 7 + counter++ * 13 + attempt * 101) % 20000;
    log_ = "/tmp/eaglet-serve-" + std::to_string(::getpid()) + "-" + std::to_string(port_) + ".log";
    const std::string cmd = eaglet_binary() + " serve --host 127.0.0.1 --port " + std::to_string(port_) + " " + args;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::execl("/bin/sh", "sh", "-c", ("exec " + cmd + " >" + log_ + " 2>&1").c_str(), nullptr);
      ::_exit(127);
    }
    httplib::Client cli("127.0.0.1", port_);
    for (int i = 0; i < 300 && !ready_; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (auto r = cli.Get("/health")) ready_ = r->status == 200;
      int status;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {  // died (port taken?): try another port
        pid_ = -1;
        break;
      }
    }
  }
}

int ServerProcess::terminate() {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  int status = 0;
  for (int i = 0; i < 1200; ++i) {  // sanitizer builds and the drain take their time
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  return -2;  // did not stop within 60 s
}

ServerProcess::~ServerProcess() {
  terminate();
  ::unlink(log_.c_str());
}

}  // namespace eaglet::test
