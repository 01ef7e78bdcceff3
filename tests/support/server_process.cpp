#include "support/server_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <thread>

#include <httplib.h>

#include "support/test_util.h"

namespace eaglet::test {

// The server binds any free port (--port 0) and logs it: choosing a port here raced with other
// tests' servers, and a health check could then be answered by someone else's server.
ServerProcess::ServerProcess(const std::string& args, const std::string& shell) {
  static int counter = 0;
  log_ = "/tmp/eaglet-serve-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".log";
  const std::string cmd = eaglet_binary() + " serve --host 127.0.0.1 --port 0 " + args;
  pid_ = ::fork();
  if (pid_ == 0) {
    ::execl("/bin/sh", "sh", "-c", (shell + " exec " + cmd + " >" + log_ + " 2>&1").c_str(), nullptr);
    ::_exit(127);
  }
  const std::string marker = " on http://127.0.0.1:";
  for (int i = 0; i < 1200 && !ready_; ++i) {  // sanitizer builds start slowly
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    int status;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {  // it died: the log says why
      pid_ = -1;
      return;
    }
    if (port_ == 0) {
      std::ifstream in(log_);
      const std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      const size_t at = log.find(marker);
      if (at == std::string::npos) continue;
      port_ = std::atoi(log.c_str() + at + marker.size());
    }
    httplib::Client cli("127.0.0.1", port_);
    if (auto r = cli.Get("/health")) ready_ = r->status == 200;
  }
}

int ServerProcess::terminate() {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  int status = 0;
  int code = -2;  // did not stop within 60 s
  for (int i = 0; i < 1200 && code == -2; ++i) {  // sanitizer builds and the drain take their time
    if (::waitpid(pid_, &status, WNOHANG) == pid_) code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    else std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (code == -2) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
  }
  pid_ = -1;
  if (code != 0) {  // a sanitizer report or a crash is in the log: show it with the failure
    std::ifstream in(log_);
    const std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "eaglet serve exited with %d; its log (last 6000 bytes):\n%s\n", code,
                 log.substr(log.size() > 6000 ? log.size() - 6000 : 0).c_str());
  }
  return code;
}

int ServerProcess::kill() {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

ServerProcess::~ServerProcess() {
  terminate();
  ::unlink(log_.c_str());
}

}  // namespace eaglet::test
