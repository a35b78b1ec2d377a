#include "scheduler/sweep/gpu_idle.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

namespace sdc {

namespace {

// "; not this process's: NVML 1, 3 (no permission)", or empty.
std::string denied_gpus(const GpuProcessList& list) {
  if (list.denied.empty()) return "";
  std::string indices;
  for (unsigned i : list.denied) indices += (indices.empty() ? "" : ", ") + std::to_string(i);
  return "; not this process's: NVML " + indices + " (no permission)";
}

}  // namespace

IdleVerdict gpu_idle(const GpuProcessSource& source, const std::vector<unsigned>& ignored_pids, bool sees_every_pid) {
  const GpuProcessList list = source();
  if (!list.driver_present) return {true, false, "no NVIDIA driver (" + nvml_library_name() + "): no GPU to be in use"};
  std::map<std::string, std::string> busy;  // GPU UUID -> its pids
  for (const GpuProcess& p : list.processes) {
    if (std::find(ignored_pids.begin(), ignored_pids.end(), p.pid) != ignored_pids.end()) continue;
    std::string& pids = busy[p.gpu_uuid];
    pids += (pids.empty() ? "pid " : ", pid ") + std::to_string(p.pid);
  }
  const std::string denied = denied_gpus(list);
  if (busy.empty() && !sees_every_pid && !list.gpus.empty()) {
    return {false, true,
            "no process listed on " + std::to_string(list.gpus.size()) +
                " GPU(s), but other containers' are hidden outside the host's pid namespace (a pod needs hostPID: "
                "true)" +
                denied};
  }
  if (busy.empty()) return {true, false, "no process on " + std::to_string(list.gpus.size()) + " GPU(s)" + denied};
  std::string reason = "in use:";
  for (const auto& [uuid, pids] : busy) reason += " " + uuid + " (" + pids + ")";
  return {false, false, reason + denied};
}

std::vector<unsigned> process_and_ancestors() {
  std::vector<unsigned> chain;
  unsigned pid = static_cast<unsigned>(getpid());
  while (pid > 1 && chain.size() < 4096) {
    chain.push_back(pid);
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) break;
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so read after the last ')'.
    const size_t close = line.rfind(')');
    if (close == std::string::npos) break;
    std::istringstream rest(line.substr(close + 1));
    char state = 0;
    unsigned parent = 0;
    if (!(rest >> state >> parent)) break;
    pid = parent;
  }
  return chain;
}

bool in_host_pid_namespace() {
  // The initial pid namespace has a fixed inode, PROC_PID_INIT_INO (include/linux/proc_ns.h).
  char link[64] = {};
  const ssize_t n = ::readlink("/proc/self/ns/pid", link, sizeof(link) - 1);
  return n > 0 && std::string(link, static_cast<size_t>(n)) == "pid:[4026531836]";
}

}  // namespace sdc
