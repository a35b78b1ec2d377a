// sdc_digest_host, sdc_digest_cuda's argument checks, sdc_device_identity and sdc_choose_every,
// through libsdcprobe's C ABI.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/common/digest.hpp"
#include "kernels/common/random.hpp"
#include "sdcprobe/sdcprobe.h"

namespace {

std::vector<unsigned char> test_bytes(size_t n, uint64_t seed) {
  std::vector<unsigned char> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<unsigned char>(sdc::mix64(seed + i) >> 56);
  return bytes;
}

// The definition, written out: the bytes zero-padded to whole little-endian words.
sdc::Digest128 reference(const std::vector<unsigned char>& bytes) {
  std::vector<unsigned char> padded(bytes);
  padded.resize((bytes.size() + 7) / 8 * 8, 0);
  sdc::Digest128 d;
  for (size_t i = 0; i < padded.size() / 8; ++i) {
    uint64_t word = 0;
    for (int b = 7; b >= 0; --b) word = word << 8 | padded[8 * i + static_cast<size_t>(b)];
    sdc::digest_add(d, word, i);
  }
  return d;
}

sdc_digest host_digest(const void* data, size_t n) {
  sdc_digest out{};
  EXPECT_EQ(sdc_digest_host(data, n, &out), SDC_OK) << sdc_last_error();
  return out;
}

// Every length up to 41 bytes, then lengths around the vector loop's eight-word steps.
TEST(DigestAbi, HostDigestIsTheZeroPaddedWordDigestForEveryLength) {
  std::vector<size_t> lengths;
  for (size_t n = 1; n <= 41; ++n) lengths.push_back(n);
  for (size_t words : {8, 9, 15, 16, 17, 63, 64, 65, 1000}) {
    for (size_t extra : {0, 3}) lengths.push_back(8 * words + extra);
  }
  for (size_t n : lengths) {
    const auto bytes = test_bytes(n, 17 * n);
    const sdc_digest got = host_digest(bytes.data(), n);
    const sdc::Digest128 want = reference(bytes);
    EXPECT_EQ(got.lo, want.lo) << n << " bytes";
    EXPECT_EQ(got.hi, want.hi) << n << " bytes";
  }
}

TEST(DigestAbi, OddLengthEqualsItsZeroPaddedCopy) {
  auto bytes = test_bytes(13, 5);
  const sdc_digest odd = host_digest(bytes.data(), 13);
  bytes.resize(16, 0);
  const sdc_digest padded = host_digest(bytes.data(), 16);
  EXPECT_EQ(odd.lo, padded.lo);
  EXPECT_EQ(odd.hi, padded.hi);
}

TEST(DigestAbi, AnyAlignmentGivesTheSameDigest) {
  const auto bytes = test_bytes(1000, 9);
  const sdc_digest aligned = host_digest(bytes.data(), bytes.size());
  for (size_t offset = 1; offset < 8; ++offset) {
    std::vector<unsigned char> shifted(bytes.size() + offset);
    std::memcpy(shifted.data() + offset, bytes.data(), bytes.size());
    const sdc_digest d = host_digest(shifted.data() + offset, bytes.size());
    EXPECT_EQ(d.lo, aligned.lo) << "offset " << offset;
    EXPECT_EQ(d.hi, aligned.hi) << "offset " << offset;
  }
}

TEST(DigestAbi, EveryBitFlipChangesBothLanes) {
  auto bytes = test_bytes(37, 3);  // the last word is partial: its bits count too
  const sdc_digest clean = host_digest(bytes.data(), bytes.size());
  for (size_t bit = 0; bit < bytes.size() * 8; ++bit) {
    bytes[bit / 8] ^= static_cast<unsigned char>(1u << (bit % 8));
    const sdc_digest flipped = host_digest(bytes.data(), bytes.size());
    bytes[bit / 8] ^= static_cast<unsigned char>(1u << (bit % 8));
    EXPECT_NE(flipped.lo, clean.lo) << "bit " << bit;
    EXPECT_NE(flipped.hi, clean.hi) << "bit " << bit;
  }
}

TEST(DigestAbi, NullAndEmptyRangesAreRefused) {
  const unsigned char byte = 1;
  sdc_digest out{};
  EXPECT_EQ(sdc_digest_host(nullptr, 8, &out), SDC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sdc_last_error()).find("data"), std::string::npos) << sdc_last_error();
  EXPECT_EQ(sdc_digest_host(&byte, 0, &out), SDC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sdc_last_error()).find("bytes"), std::string::npos) << sdc_last_error();
  EXPECT_EQ(sdc_digest_host(&byte, 1, nullptr), SDC_ERR_INVALID_ARGUMENT);
  // Checked before any device is looked for, so the same on a machine without a GPU.
  EXPECT_EQ(sdc_digest_cuda(nullptr, 8, reinterpret_cast<sdc_digest*>(&out), nullptr), SDC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sdc_digest_cuda(&byte, 0, &out, nullptr), SDC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sdc_digest_cuda(&byte, 1, nullptr, nullptr), SDC_ERR_INVALID_ARGUMENT);
}

TEST(DigestAbi, CudaDigestOfHostMemoryIsRefused) {
  const uint64_t word = 1;
  sdc_digest out{};
  // No GPU: SDC_ERR_NO_DEVICE; a GPU: host memory is not device memory.
  const sdc_status status = sdc_digest_cuda(&word, sizeof word, &out, nullptr);
  EXPECT_TRUE(status == SDC_ERR_NO_DEVICE || status == SDC_ERR_INVALID_ARGUMENT) << status << sdc_last_error();
  EXPECT_STRNE(sdc_last_error(), "");
}

TEST(DigestAbi, CpuIdentityNamesTheDevice) {
  size_t needed = 0;
  EXPECT_EQ(sdc_device_identity("cpu", 0, nullptr, 0, &needed), SDC_ERR_BUFFER_TOO_SMALL);
  ASSERT_GT(needed, 1u);
  std::vector<char> buf(needed);
  ASSERT_EQ(sdc_device_identity("cpu", 0, buf.data(), buf.size(), nullptr), SDC_OK) << sdc_last_error();
  const auto j = nlohmann::json::parse(buf.data());
  EXPECT_EQ(j["backend"], "cpu");
  EXPECT_EQ(j["uuid"].get<std::string>().rfind("CPU-", 0), 0u) << j.dump();
  EXPECT_EQ(j["pci_bus_id"].get<std::string>().rfind("cpu:", 0), 0u) << j.dump();
  EXPECT_EQ(sdc_device_identity("tpu", 0, buf.data(), buf.size(), nullptr), SDC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sdc_device_identity("cpu", -1, buf.data(), buf.size(), nullptr), SDC_ERR_INVALID_ARGUMENT);
}

TEST(DigestAbi, ChooseEveryKeepsTheCheckWithinTheBudget) {
  int64_t every = 0;
  // A 1 s check on a 0.1 s step within 1%: at least 1 / (0.01 * 0.1) = 1000 steps apart.
  ASSERT_EQ(sdc_choose_every(0.1, 1.0, 0, 0.01, &every), SDC_OK) << sdc_last_error();
  EXPECT_GE(every, 1000);
  int64_t cheap = 0;
  ASSERT_EQ(sdc_choose_every(0.1, 1e-6, 0, 0.01, &cheap), SDC_OK);
  EXPECT_LT(cheap, every);  // a cheaper check runs more often
  EXPECT_EQ(sdc_choose_every(0, 1.0, 0, 0.01, &every), SDC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sdc_choose_every(0.1, -1.0, 0, 0.01, &every), SDC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sdc_choose_every(0.1, 1.0, 0, 1.5, &every), SDC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sdc_choose_every(0.1, 1.0, -1, 0.01, &every), SDC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sdc_choose_every(0.1, 1.0, 0, 0.01, nullptr), SDC_ERR_INVALID_ARGUMENT);
  // Each refusal names the argument.
  auto refusal = [&every](double step_s, double rate, double budget) {
    EXPECT_EQ(sdc_choose_every(step_s, 1.0, rate, budget, &every), SDC_ERR_INVALID_ARGUMENT);
    return std::string(sdc_last_error());
  };
  EXPECT_NE(refusal(0, 0, 0.01).find("step_s"), std::string::npos);
  EXPECT_NE(refusal(0.1, 0, 1.5).find("budget_fraction"), std::string::npos);
  EXPECT_NE(refusal(0.1, -1, 0.01).find("sdc_rate_per_device_day"), std::string::npos);
}

TEST(DigestAbi, ChooseJobEveryScalesTheRateWithTheRanks) {
  int64_t one = 0, job = 0, every = 7;
  ASSERT_EQ(sdc_choose_every(0.1, 0.02875, 0, 0.01, &one), SDC_OK) << sdc_last_error();
  ASSERT_EQ(sdc_choose_job_every(0.1, 0.02875, 0, 0.01, 1, &job), SDC_OK) << sdc_last_error();
  EXPECT_EQ(job, one);
  ASSERT_EQ(sdc_choose_job_every(0.1, 0.02875, 0, 0.01, 1024, &job), SDC_OK) << sdc_last_error();
  EXPECT_NEAR(static_cast<double>(one) / static_cast<double>(job), 32.0, 0.01);  // sqrt(1024)
  EXPECT_EQ(sdc_choose_job_every(0.1, 0.02875, 0, 0.01, 0, &every), SDC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sdc_last_error()).find("ranks"), std::string::npos) << sdc_last_error();
  EXPECT_EQ(every, 7);
}

TEST(DigestAbi, ChooseEveryRefusesNonFiniteArguments) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  int64_t every = 7;
  // inf / inf made a NaN that was cast to int64 (undefined; it came back as INT64_MIN with SDC_OK).
  EXPECT_EQ(sdc_choose_every(inf, inf, 0, 0.01, &every), SDC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sdc_last_error()).find("finite"), std::string::npos) << sdc_last_error();
  EXPECT_EQ(sdc_choose_every(0.1, inf, 0, 0.01, &every), SDC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sdc_choose_every(inf, 1.0, 0, 0.01, &every), SDC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sdc_choose_every(nan, 1.0, 0, 0.01, &every), SDC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sdc_choose_every(0.1, 1.0, inf, 0.01, &every), SDC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sdc_choose_every(0.1, 1.0, nan, 0.01, &every), SDC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(every, 7);  // untouched on error
  // The extremes that are finite still give a cadence in range.
  ASSERT_EQ(sdc_choose_every(1e-300, 1e300, 1e-300, 1e-300, &every), SDC_OK) << sdc_last_error();
  EXPECT_GE(every, 1);
  ASSERT_EQ(sdc_choose_every(1e300, 1e-300, 1e300, 1.0, &every), SDC_OK) << sdc_last_error();
  EXPECT_GE(every, 1);
}

}  // namespace
