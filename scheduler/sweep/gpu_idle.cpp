#include "scheduler/sweep/gpu_idle.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

namespace sdc {

IdleVerdict gpu_idle(const GpuProcessSource& source, const std::vector<unsigned>& ignored_pids) {
  const GpuProcessList list = source();
  if (!list.driver_present) return {true, "no NVIDIA driver (" + nvml_library_name() + "): no GPU to be in use"};
  std::map<std::string, std::string> busy;  // GPU UUID -> its pids
  for (const GpuProcess& p : list.processes) {
    if (std::find(ignored_pids.begin(), ignored_pids.end(), p.pid) != ignored_pids.end()) continue;
    std::string& pids = busy[p.gpu_uuid];
    pids += (pids.empty() ? "pid " : ", pid ") + std::to_string(p.pid);
  }
  if (busy.empty()) return {true, "no process on " + std::to_string(list.gpus) + " GPU(s)"};
  std::string reason = "in use:";
  for (const auto& [uuid, pids] : busy) reason += " " + uuid + " (" + pids + ")";
  return {false, reason};
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

}  // namespace sdc
