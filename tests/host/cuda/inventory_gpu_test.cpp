// The PCI inventory against a real GPU: every GPU CUDA shows is found on the bus under the same bus
// id, and a GPU hidden from CUDA (CUDA_VISIBLE_DEVICES, as a fallen-off GPU would be) is a failed
// device naming its bus id, unless --expect-gpus allows for it. Each look runs in a forked child
// that alone initialises CUDA, since CUDA_VISIBLE_DEVICES counts only before the first CUDA call.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "host/backend.hpp"
#include "host/pci_inventory.hpp"

namespace sdc {
namespace {

struct Seen {
  std::string backend, bus_id, uuid, open_error;
};

// open_devices({"auto", 1, expect}) in a child with CUDA_VISIBLE_DEVICES=`visible` (unset when
// null); one line per device.
std::vector<Seen> open_in_child(const char* visible, int expect) {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    if (visible != nullptr) ::setenv("CUDA_VISIBLE_DEVICES", visible, 1);
    std::ostringstream out;
    for (const auto& d : open_devices({"auto", 1, expect})) {
      const DeviceIdentity& id = d->identity();
      out << id.backend << '\t' << id.pci_bus_id << '\t' << id.uuid << '\t' << id.open_error << '\n';
    }
    const std::string text = out.str();
    if (::write(fds[1], text.data(), text.size()) != static_cast<ssize_t>(text.size())) ::_exit(1);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof(buf))) > 0) text.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::vector<Seen> seen;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    Seen s;
    std::getline(fields, s.backend, '\t');
    std::getline(fields, s.bus_id, '\t');
    std::getline(fields, s.uuid, '\t');
    std::getline(fields, s.open_error);
    seen.push_back(s);
  }
  return seen;
}

TEST(InventoryGpu, CudaShowingOneGpuFewerThanTheBusNamesIt) {
  // The test hides a GPU from CUDA and expects the bus to name it: it needs the bus to show GPUs. A
  // sandbox (gVisor) may give CUDA a GPU while its /sys lists no PCI GPU at all.
  const std::vector<PciGpu> bus = gpus_on_bus(system_root());
  if (bus.empty()) GTEST_SKIP() << "sysfs shows no PCI GPU here (a sandbox such as gVisor)";
  const std::vector<Seen> all = open_in_child(nullptr, -1);
  if (all.empty() || all.front().backend != "cuda") GTEST_SKIP() << "no GPU on this machine's PCI bus";
  std::vector<Seen> working;
  for (const Seen& s : all) {
    EXPECT_EQ(s.open_error, "") << s.bus_id << " on the bus but not shown by CUDA on a healthy node?";
    if (s.open_error.empty()) working.push_back(s);
  }
  ASSERT_FALSE(working.empty()) << "CUDA shows none of the GPUs on the bus: " << all.front().open_error;
  // Every GPU CUDA shows is on the bus, under CUDA's own bus id.
  for (const Seen& s : working) {
    bool found = false;
    for (const PciGpu& g : bus) found = found || g.pci_bus_id.substr(0, 15) == s.bus_id.substr(0, 15);
    EXPECT_TRUE(found) << s.bus_id << " (CUDA) is not among the " << bus.size() << " GPUs sysfs lists";
  }

  // Hide the last GPU: CUDA shows one fewer than the bus holds.
  std::string visible;
  for (size_t i = 0; i + 1 < working.size(); ++i) visible += (visible.empty() ? "" : ",") + working[i].uuid;
  if (visible.empty()) visible = "-1";  // one GPU: hide it
  const std::vector<Seen> hidden = open_in_child(visible.c_str(), -1);
  size_t failed = 0;
  for (const Seen& s : hidden) {
    if (s.open_error.empty()) continue;
    ++failed;
    EXPECT_EQ(s.bus_id, working.back().bus_id);
    EXPECT_NE(s.open_error.find("is on the PCI bus but CUDA does not show it"), std::string::npos) << s.open_error;
  }
  EXPECT_EQ(failed, 1u);
  EXPECT_EQ(hidden.size(), working.size());

  // Said on purpose (--expect-gpus), the hidden GPU is no fault; one GPU fewer than expected is.
  const int fewer = static_cast<int>(working.size()) - 1;
  const std::vector<Seen> allowed = open_in_child(visible.c_str(), fewer);
  for (const Seen& s : allowed) EXPECT_EQ(s.open_error, "") << s.bus_id;
  if (fewer == 0) {
    ASSERT_EQ(allowed.size(), 1u);
    EXPECT_EQ(allowed.front().backend, "cpu");  // none expected: the CPU, as asked
  } else {
    EXPECT_EQ(allowed.size(), static_cast<size_t>(fewer));
  }
}

}  // namespace
}  // namespace sdc
