// The GPU inventory from a fake sysfs / procfs tree, and what open_devices makes of it when CUDA
// shows fewer GPUs than the bus holds (here CUDA shows none: no GPU, or no CUDA backend).
#include "host/pci_inventory.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "host/backend.hpp"
#include "host/error.hpp"
#include "tests/fuzz/mutate.hpp"

namespace sdc {
namespace {

namespace fs = std::filesystem;

class FakeRoot : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("sdcprobe-sysfs-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "sys/bus/pci/devices");
  }
  void TearDown() override {
    ::unsetenv("SDCPROBE_SYSFS_ROOT");
    fs::remove_all(root_);
  }
  void write(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }
  void pci(const std::string& address, const std::string& vendor, const std::string& pci_class,
           const std::string& device = "0x2335") {
    const fs::path dir = root_ / "sys/bus/pci/devices" / address;
    write(dir / "vendor", vendor + "\n");
    write(dir / "class", pci_class + "\n");
    write(dir / "device", device + "\n");
  }
  // Four H200s, as sysfs lists them, among other NVIDIA and non-NVIDIA functions.
  void four_gpus() {
    pci("0000:1b:00.0", "0x10de", "0x030200");
    pci("0000:43:00.0", "0x10de", "0x030200");
    pci("0000:52:00.0", "0x10de", "0x030000");
    pci("0000:61:00.0", "0x10de", "0x030200");
    pci("0000:1b:00.1", "0x10de", "0x040300");  // the GPU's audio function
    pci("0000:05:00.0", "0x10de", "0x068000");  // an NVSwitch
    pci("0000:00:02.0", "0x8086", "0x030000");  // another vendor's display controller
    pci("0000:07:00.0", "garbage", "0x030200");
  }
  fs::path root_;
};

TEST(PciInventory, NormalizesBusIdsAsCudaWritesThem) {
  EXPECT_EQ(normalize_pci_bus_id("0000:3b:00.0"), "00000000:3B:00.0");
  EXPECT_EQ(normalize_pci_bus_id("10000:e1:1f.7"), "00010000:E1:1F.7");
  EXPECT_EQ(normalize_pci_bus_id("00000000:3B:00.0"), "00000000:3B:00.0");
  for (const char* bad : {"", "0000:3b:00", "0000:3b.00.0", "0000:3b:20.0", "0000:3b:00.8", "000000000:3b:00.0",
                          "0000:3bb:00.0", "0000:3b:00.0x", ":3b:00.0", "zz00:3b:00.0"}) {
    EXPECT_FALSE(normalize_pci_bus_id(bad)) << bad;
  }
}

TEST(PciInventory, ParsesSysfsHexAttributes) {
  EXPECT_EQ(parse_sysfs_hex("0x10de\n"), 0x10deu);
  EXPECT_EQ(parse_sysfs_hex("0x030200"), 0x030200u);
  for (const char* bad : {"", "10de", "0x", "0x10dg", "0x123456789", "-0x1"}) EXPECT_FALSE(parse_sysfs_hex(bad)) << bad;
}

TEST(PciInventory, ReadsTheDriversModelAndUuid) {
  PciGpu gpu;
  parse_nvidia_information(
      "Model: \t\t NVIDIA H200\nIRQ:   \t\t 35\nGPU UUID: \t GPU-5f1e0c2a-1111-2222-3333-444455556666\n"
      "Bus Location: \t 0000:1b:00.0\n",
      gpu);
  EXPECT_EQ(gpu.model, "NVIDIA H200");
  EXPECT_EQ(gpu.uuid, "GPU-5f1e0c2a-1111-2222-3333-444455556666");
  PciGpu unknown;
  parse_nvidia_information("Model: NVIDIA H200\nGPU UUID: ??\n", unknown);
  EXPECT_EQ(unknown.uuid, "");
}

TEST_F(FakeRoot, ListsOnlyNvidiaDisplayAnd3dControllers) {
  four_gpus();
  // The driver knows one more GPU than sysfs shows here, and has the model and UUID of the first.
  write(root_ / "proc/driver/nvidia/gpus/0000:1b:00.0/information",
        "Model: NVIDIA H200\nGPU UUID: GPU-00000000-1111-2222-3333-444444444444\n");
  write(root_ / "proc/driver/nvidia/gpus/0000:9a:00.0/information", "Model: NVIDIA H200\n");
  const std::vector<PciGpu> gpus = gpus_on_bus(root_.string());
  ASSERT_EQ(gpus.size(), 5u);
  EXPECT_EQ(gpus[0].pci_bus_id, "00000000:1B:00.0");
  EXPECT_EQ(gpus[0].model, "NVIDIA H200");
  EXPECT_EQ(gpus[0].uuid, "GPU-00000000-1111-2222-3333-444444444444");
  EXPECT_EQ(gpus[0].pci_device, 0x2335u);
  EXPECT_EQ(gpus[1].pci_bus_id, "00000000:43:00.0");
  EXPECT_EQ(gpus[2].pci_bus_id, "00000000:52:00.0");
  EXPECT_EQ(gpus[3].pci_bus_id, "00000000:61:00.0");
  EXPECT_EQ(gpus[4].pci_bus_id, "00000000:9A:00.0");
}

TEST_F(FakeRoot, NoTreeMeansNoGpu) { EXPECT_TRUE(gpus_on_bus((root_ / "nothing").string()).empty()); }

TEST_F(FakeRoot, NamesTheGpuCudaDoesNotShow) {
  four_gpus();
  std::vector<DeviceIdentity> seen(3);
  seen[0].pci_bus_id = "00000000:1B:00.0";
  seen[1].pci_bus_id = "00000000:61:00.0";
  seen[2].pci_bus_id = "0000:52:00.0";  // cudaDeviceGetPCIBusId's shorter domain
  const std::vector<PciGpu> missing = gpus_not_seen(gpus_on_bus(root_.string()), seen);
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0].pci_bus_id, "00000000:43:00.0");
}

TEST_F(FakeRoot, GpusOnTheBusThatCudaCannotShowAreFailedDevicesNeverTheCpu) {
  four_gpus();
  ::setenv("SDCPROBE_SYSFS_ROOT", root_.c_str(), 1);
  if (!make_cuda_devices().empty()) GTEST_SKIP() << "this machine has a GPU: the fake tree cannot stand for it";
  for (const std::string backend : {"auto", "cuda"}) {
    const auto devices = open_devices({backend, 1});
    ASSERT_EQ(devices.size(), 4u) << backend;
    const char* bus[] = {"00000000:1B:00.0", "00000000:43:00.0", "00000000:52:00.0", "00000000:61:00.0"};
    for (size_t i = 0; i < 4; ++i) {
      const DeviceIdentity& id = devices[i]->identity();
      EXPECT_EQ(id.backend, "cuda");
      EXPECT_EQ(id.pci_bus_id, bus[i]);
      EXPECT_EQ(id.open_error, devices[i]->open_error());
      EXPECT_NE(id.open_error.find(std::string("GPU ") + bus[i] + " is on the PCI bus but CUDA does not show it"),
                std::string::npos)
          << id.open_error;
      // CUDA's own reason comes with it.
      EXPECT_NE(id.open_error.find(cuda_unavailable_reason()), std::string::npos) << id.open_error;
    }
  }
  // Asked for, the CPU is tested; and so it is where no GPU is expected (--expect-gpus 0).
  EXPECT_EQ(open_devices({"cpu", 2}).size(), 2u);
  EXPECT_EQ(open_devices({"cpu", 2}).front()->identity().backend, "cpu");
  EXPECT_EQ(open_devices({"auto", 1, 0}).front()->identity().backend, "cpu");
  EXPECT_THROW(open_devices({"cuda", 1, 0}), NoDeviceError);
}

TEST_F(FakeRoot, ExpectedGpusBeyondTheBusAreNamedMissing) {
  four_gpus();
  ::setenv("SDCPROBE_SYSFS_ROOT", root_.c_str(), 1);
  if (!make_cuda_devices().empty()) GTEST_SKIP() << "this machine has a GPU: the fake tree cannot stand for it";
  const auto devices = open_devices({"auto", 1, 6});
  ASSERT_EQ(devices.size(), 6u);
  EXPECT_NE(devices[5]->open_error().find("6 GPUs expected but only 4 on the PCI bus"), std::string::npos)
      << devices[5]->open_error();
}

TEST_F(FakeRoot, NoGpuOnTheBusLeavesTheCpu) {
  pci("0000:00:02.0", "0x8086", "0x030000");
  ::setenv("SDCPROBE_SYSFS_ROOT", root_.c_str(), 1);
  if (!make_cuda_devices().empty()) GTEST_SKIP() << "this machine has a GPU: the fake tree cannot stand for it";
  EXPECT_EQ(open_devices({"auto", 1}).front()->identity().backend, "cpu");
  EXPECT_THROW(open_devices({"cuda", 1}), NoDeviceError);
}

// Seeded mutations of every file the inventory reads: never a crash, and a bus id it accepts is
// always one CUDA could print (normalizing it again changes nothing).
TEST(PciInventoryFuzz, MutatedAttributesNeverCrashAndStayCanonical) {
  fuzz::Mutator m(1);
  const std::vector<std::string> dictionary = {":", ".", "0x", "10de", "\n", "GPU UUID:", "Model:", "GPU-"};
  for (int i = 0; i < 20000; ++i) {
    const std::string address = m.mutate("0000:3b:00.0", dictionary);
    if (const auto id = normalize_pci_bus_id(address)) {
      EXPECT_EQ(normalize_pci_bus_id(*id), id) << "case " << i << ": " << address;
      EXPECT_EQ(id->size(), 16u) << "case " << i << ": " << address;
    }
    (void)parse_sysfs_hex(m.mutate("0x030200\n", dictionary));
    PciGpu gpu;
    parse_nvidia_information(m.mutate("Model: NVIDIA H200\nGPU UUID: GPU-1234\n", dictionary), gpu);
    EXPECT_TRUE(gpu.uuid.empty() || gpu.uuid.rfind("GPU-", 0) == 0) << "case " << i;
  }
}

}  // namespace
}  // namespace sdc
