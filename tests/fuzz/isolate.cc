// Crash isolation: programs run in forked children, which report each
// program's start and result through a pipe; a child that dies by a signal
// (or an alarm: a hang) leaves its last started program as a crash finding,
// and a new child goes on with the next one (a child also ends after
// kChildRuns runs, bounding what it loads). The parent never touches
// fusebox (a CUDA context does not survive fork).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tensor/device.h"
#include "tests/fuzz/check.h"

namespace fusebox::fuzz {
namespace {

void WriteLine(int fd, const std::string& line) {
  const std::string l = line + "\n";
  size_t done = 0;
  while (done < l.size()) {
    const ssize_t n = write(fd, l.data() + done, l.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}
std::string OneLine(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\t') c = ' ';
  }
  return s.substr(0, 600);
}
std::string SignalName(int sig) { return absl::StrCat(sig == SIGALRM ? "timeout (SIGALRM)" : strsignal(sig), " (signal ", sig, ")"); }

// Forks a child running `body(fd)`; calls `on_line` per line it writes; returns
// the wait status.
template <typename Body, typename OnLine>
int Forked(Body body, OnLine on_line) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    body(fds[1]);
    close(fds[1]);
    std::fflush(nullptr);
    _exit(0);
  }
  close(fds[1]);
  std::string buf;
  char chunk[4096];
  for (ssize_t n; (n = read(fds[0], chunk, sizeof(chunk))) > 0;) {
    buf.append(chunk, static_cast<size_t>(n));
    for (size_t at; (at = buf.find('\n')) != std::string::npos; buf.erase(0, at + 1)) on_line(buf.substr(0, at));
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

}  // namespace

Outcome RunIsolated(const Program& p, Mode mode, Device device, int timeout_s) {
  Outcome out{"crash", "no result"};
  const int status = Forked(
      [&](int fd) {
        alarm(timeout_s);
        const Outcome o = RunProgram(p, mode, device);
        WriteLine(fd, absl::StrCat(o.kind, "\t", OneLine(o.detail)));
      },
      [&](const std::string& line) {
        const size_t tab = line.find('\t');
        out = {line.substr(0, tab), line.substr(tab + 1)};
      });
  if (WIFSIGNALED(status)) out = {"crash", SignalName(WTERMSIG(status))};
  return out;
}

constexpr int64_t kChildRuns = 1000;

RunSummary RunMany(uint64_t first, int64_t count, const std::vector<Mode>& modes, Device device,
                   const GenOptions& options, bool verbose) {
  RunSummary sum;
  const int64_t total = count * static_cast<int64_t>(modes.size());
  int64_t next = 0;  // the next (program, mode) pair to run
  while (next < total) {
    int64_t started = -1, finished = next - 1;
    const int64_t from = next;
    // A child runs at most kChildRuns (program, mode) pairs, then exits: each
    // compiled CPU kernel stays loaded (dlopen), so one child over thousands
    // of programs ran out of memory mappings (vm.max_map_count).
    const int64_t until = std::min(total, from + kChildRuns);
    const int status = Forked(
        [&](int fd) {
          for (int64_t k = from; k < until; ++k) {
            const uint64_t seed = first + k / modes.size();
            const Mode mode = modes[k % modes.size()];
            WriteLine(fd, absl::StrCat("S\t", k));
            alarm(300);
            const Program p = Generate(seed, options);
            const Outcome o = RunProgram(p, mode, device);
            WriteLine(fd, absl::StrCat("R\t", k, "\t", p.must_fail ? 1 : 0, "\t", o.kind, "\t", OneLine(o.detail)));
          }
        },
        [&](const std::string& line) {
          const std::vector<std::string> f = absl::StrSplit(line, '\t');
          const int64_t k = std::stoll(f[1]);
          if (f[0] == "S") {
            started = k;
            return;
          }
          finished = k;
          const uint64_t seed = first + k / modes.size();
          const Mode mode = modes[k % modes.size()];
          if (k % static_cast<int64_t>(modes.size()) == 0 && f[2] == "1") ++sum.must_fail;
          if (f[3].empty()) {
            ++sum.clean[static_cast<int>(mode)];
          } else {
            sum.findings.push_back({seed, mode, {f[3], f[4]}});
            if (verbose) std::fprintf(stderr, "seed %llu %s: %s: %s\n", static_cast<unsigned long long>(seed), ModeName(mode), f[3].c_str(), f[4].c_str());
          }
        });
    next = finished + 1;
    const bool batch_done = WIFEXITED(status) && WEXITSTATUS(status) == 0 && next == until;
    if (next < total && !batch_done) {  // the child stopped early: its last started program is the culprit
      const int64_t bad = started > finished ? started : next;
      const std::string why = WIFSIGNALED(status) ? SignalName(WTERMSIG(status))
                                                  : absl::StrCat("child exited with status ", WEXITSTATUS(status));
      const uint64_t seed = first + bad / modes.size();
      const Mode mode = modes[bad % modes.size()];
      sum.findings.push_back({seed, mode, {"crash", why}});
      if (verbose) std::fprintf(stderr, "seed %llu %s: crash: %s\n", static_cast<unsigned long long>(seed), ModeName(mode), why.c_str());
      next = bad + 1;
    }
  }
  return sum;
}

bool ParseExclusions(const std::string& list, Exclusions* out) {
  for (const std::string& c : std::vector<std::string>(absl::StrSplit(list, ',', absl::SkipEmpty()))) {
    bool* flag = c == "zero-size" ? &out->zero_size : c == "zero-dim" ? &out->zero_dim : c == "mixed-dtype" ? &out->mixed_dtype
                 : c == "alias" ? &out->alias : c == "must-fail" ? &out->must_fail : c == "matmul" ? &out->matmul
                 : c == "size1-reduction" ? &out->size1_reduction
                 : c == "float-condition" ? &out->float_condition : nullptr;
    if (!flag) return false;
    *flag = true;
  }
  return true;
}

bool CudaAvailableInChild() {
  bool available = false;
  Forked([](int fd) { WriteLine(fd, cuda_available() ? "1" : "0"); },
         [&](const std::string& line) { available = line == "1"; });
  return available;
}

}  // namespace fusebox::fuzz
