#include "cli/launch.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "core/error.h"
#include "core/free_port.h"

namespace eaglet::cli {

namespace {
std::vector<pid_t> g_children;  // read by the signal handler

void forward_signal(int sig) {
  for (pid_t p : g_children)
    if (p > 0) kill(p, sig);
}

std::string describe(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with code {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("was killed by signal {}", WTERMSIG(status));
  return "stopped";
}

int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}
}  // namespace

int launch_local_ranks(int nproc, const std::vector<std::string>& args, int grace_seconds) {
  EAGLET_CHECK(nproc >= 1 && nproc <= 256, "--nproc-per-node must be in [1, 256] (got {})", nproc);
  const char* port_env = std::getenv("MASTER_PORT");
  const std::string port = port_env && *port_env ? port_env : std::to_string(free_local_port());
  const char* addr_env = std::getenv("MASTER_ADDR");
  const std::string addr = addr_env && *addr_env ? addr_env : "127.0.0.1";
  std::vector<std::string> argv_s{"/proc/self/exe"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  g_children.assign(size_t(nproc), -1);
  for (int r = 0; r < nproc; ++r) {
    const pid_t pid = fork();
    EAGLET_CHECK(pid >= 0, "launch: fork failed for rank {}", r);
    if (pid == 0) {
      setenv("RANK", std::to_string(r).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      setenv("MASTER_ADDR", addr.c_str(), 1);
      setenv("MASTER_PORT", port.c_str(), 1);
      execv("/proc/self/exe", argv.data());
      std::fprintf(stderr, "launch: exec failed for rank %d\n", r);
      _exit(127);
    }
    g_children[size_t(r)] = pid;
  }
  signal(SIGINT, forward_signal);
  signal(SIGTERM, forward_signal);
  spdlog::info("launched {} ranks (MASTER_ADDR={} MASTER_PORT={})", nproc, addr, port);

  int first_failure = 0, running = nproc;
  auto deadline = std::chrono::steady_clock::time_point::max();
  bool terminated = false;
  while (running > 0) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (int r = 0; r < nproc; ++r)
        if (g_children[size_t(r)] == pid) {
          g_children[size_t(r)] = -1;
          --running;
          if (exit_code(status) != 0) {
            spdlog::error("rank {} {}", r, describe(status));
            if (first_failure == 0) {
              first_failure = exit_code(status);
              deadline = std::chrono::steady_clock::now() + std::chrono::seconds(grace_seconds);
            }
          }
        }
      continue;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      // The survivors did not stop on their own: end them (SIGTERM, then SIGKILL).
      forward_signal(terminated ? SIGKILL : SIGTERM);
      if (!terminated) spdlog::error("terminating {} rank(s) still running after rank failure", running);
      terminated = true;
      deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  return first_failure;
}

}  // namespace eaglet::cli
