#include <gtest/gtest.h>

#include <csignal>

#include "host/error.hpp"
#include "host/injection.hpp"

namespace sdc {
namespace {

InjectionPoint point(std::string_view probe, int device, uint64_t elements = 1000, unsigned width = 64) {
  InjectionPoint p;
  p.probe = probe;
  p.device_index = device;
  p.device_uuid = "GPU-test";
  p.elements = elements;
  p.width_bits = width;
  return p;
}

TEST(InjectionSpec, ParsesEveryField) {
  const auto specs = parse_injection_specs(
      "probe=gemm.*, device=1, rank=3, model=multibit, bit=30, bits=3, count=4, index=17, mode=intermittent, p=0.25;"
      "model=lane,lane=5,lanes=8,mask=0xf0");
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[0].probe, "gemm.*");
  EXPECT_EQ(specs[0].device, "1");
  EXPECT_EQ(specs[0].rank, 3);
  EXPECT_EQ(specs[0].model, FaultModel::kMultibit);
  EXPECT_EQ(specs[0].bit, 30);
  EXPECT_EQ(specs[0].bits, 3);
  EXPECT_EQ(specs[0].count, 4u);
  EXPECT_EQ(specs[0].index, 17);
  EXPECT_EQ(specs[0].mode, FaultMode::kIntermittent);
  EXPECT_DOUBLE_EQ(specs[0].probability, 0.25);
  EXPECT_EQ(specs[1].model, FaultModel::kLane);
  EXPECT_EQ(specs[1].lane, 5u);
  EXPECT_EQ(specs[1].lanes, 8u);
  EXPECT_EQ(specs[1].mask, 0xf0u);
  EXPECT_EQ(specs[1].mode, FaultMode::kPermanent);
}

TEST(InjectionSpec, BadSpecsNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "empty"},
      {"bit=3", "'model'"},
      {"model=cosmic", "'model'"},
      {"model=bitflip,bit=64", "'bit'"},
      {"model=bitflip,bit=-1", "'bit'"},
      {"model=bitflip,mode=sometimes", "'mode'"},
      {"model=bitflip,mode=intermittent,p=1.5", "'p'"},
      {"model=bitflip,p=0.5", "'p'"},
      {"model=bitflip,colour=red", "'colour'"},
      {"model=bitflip,count", "'count'"},
      {"model=bitflip,count=", "'count'"},
      {"model=lane,lane=32", "'lane'"},
      {"model=multibit,bits=1", "'bits'"},
      {"model=stuck,value=2", "'value'"},
      // Numbers are decimal or 0x hex: no octal, no sign, no saturation.
      {"model=bitflip,bit=010", "'bit'"},
      {"model=bitflip,index=-1", "'index'"},
      {"model=bitflip,after=18446744073709551616", "'after'"},
      {"model=bitflip,mode=intermittent,p=nan", "'p'"},
      // An empty clause injects nothing: an error, wherever it is.
      {"model=bitflip;;model=stuck", "clause 2 is empty"},
      {"model=bitflip;", "clause 2 is empty"},
      {";model=bitflip", "clause 1 is empty"},
  };
  for (const auto& [spec, field] : cases) {
    try {
      parse_injection_specs(spec);
      ADD_FAILURE() << "accepted: " << spec;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << spec << " -> " << e.what();
    }
  }
}

TEST(InjectionSpec, HexAndDecimalAreTheOnlyBases) {
  EXPECT_EQ(parse_injection_specs("model=bitflip,bit=10").front().bit, 10);
  EXPECT_EQ(parse_injection_specs("model=bitflip,bit=0x10").front().bit, 16);
  EXPECT_EQ(parse_injection_specs("model=bitflip,bit=0").front().bit, 0);
}

TEST(InjectionSpec, AClauseThatMatchesNothingIsAnError) {
  const std::vector<std::string> probes = {"alu.fma32", "mem.own_address"};
  const std::vector<std::pair<int, std::string>> devices = {{0, "CPU-a"}, {1, "CPU-b"}};
  auto error = [&](const char* spec) -> std::string {
    try {
      check_injection_targets(parse_injection_specs(spec), probes, devices);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(error("model=bitflip"), "");
  EXPECT_EQ(error("model=bitflip,probe=alu.*,device=1"), "");
  EXPECT_EQ(error("model=bitflip,device=CPU-b"), "");
  EXPECT_NE(error("model=bitflip,device=99").find("field 'device': '99' matches no device"), std::string::npos);
  EXPECT_NE(error("model=bitflip,probe=alu.fma23").find("field 'probe': 'alu.fma23' matches no probe"),
            std::string::npos);
  // Every clause must match, not just one.
  EXPECT_NE(error("model=bitflip;model=stuck,probe=gemm.*").find("'model=stuck,probe=gemm.*'"), std::string::npos);
}

TEST(Injector, DigestCorruptionChangesOnlyTheMatchingDigest) {
  Injector inj(parse_injection_specs("model=digest,probe=gemm.*,device=1,rank=3"), 5, 3);
  EXPECT_TRUE(inj.plan(point("gemm.exact.fp32", 1)).empty());  // the output is left alone
  const Digest128 clean{11, 22};
  Digest128 d = clean;
  inj.corrupt_digest("gemm.exact.fp32", 0, "GPU-x", d);
  EXPECT_EQ(d, clean);  // another device
  inj.corrupt_digest("alu.fma32", 1, "GPU-x", d);
  EXPECT_EQ(d, clean);  // another probe
  inj.corrupt_digest("gemm.exact.fp32", 1, "GPU-x", d);
  EXPECT_NE(d.lo, clean.lo);
  EXPECT_NE(d.hi, clean.hi);
  Injector other_rank(parse_injection_specs("model=digest,rank=3"), 5, 2);
  Digest128 e = clean;
  other_rank.corrupt_digest("gemm.exact.fp32", 1, "GPU-x", e);
  EXPECT_EQ(e, clean);
}

TEST(Glob, MatchesDottedIds) {
  EXPECT_TRUE(glob_match("*", "mem.march_c"));
  EXPECT_TRUE(glob_match("gemm.*", "gemm.exact.bf16"));
  EXPECT_TRUE(glob_match("gemm.*.bf16", "gemm.exact.bf16"));
  EXPECT_TRUE(glob_match("alu.fma??", "alu.fma32"));
  EXPECT_FALSE(glob_match("gemm.*", "mem.march_c"));
  EXPECT_FALSE(glob_match("alu.fma", "alu.fma32"));
}

TEST(Injector, SelectsProbeAndDevice) {
  Injector inj(parse_injection_specs("probe=alu.*,device=2,model=bitflip,bit=7,index=5"), 1);
  EXPECT_TRUE(inj.plan(point("mem.march_c", 2)).empty());
  EXPECT_TRUE(inj.plan(point("alu.fma32", 1)).empty());
  const Corruption c = inj.plan(point("alu.fma32", 2));
  ASSERT_EQ(c.xors.size(), 1u);
  EXPECT_EQ(c.xors[0].index, 5u);
  EXPECT_EQ(c.xors[0].mask, 1u << 7);
}

TEST(Injector, DeviceMatchesUuidAndRank) {
  Injector by_uuid(parse_injection_specs("device=GPU-test,model=bitflip"), 1);
  EXPECT_FALSE(by_uuid.plan(point("x", 7)).empty());
  Injector other_rank(parse_injection_specs("rank=3,model=bitflip"), 1, /*rank=*/2);
  EXPECT_TRUE(other_rank.plan(point("x", 0)).empty());
  Injector this_rank(parse_injection_specs("rank=3,model=bitflip"), 1, /*rank=*/3);
  EXPECT_FALSE(this_rank.plan(point("x", 0)).empty());
}

TEST(Injector, ModesFireAsSpecified) {
  Injector transient(parse_injection_specs("model=bitflip,mode=transient"), 1);
  EXPECT_FALSE(transient.plan(point("p", 0)).empty());
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(transient.plan(point("p", 0)).empty());

  Injector permanent(parse_injection_specs("model=bitflip"), 1);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(permanent.plan(point("p", 0)).empty());

  Injector intermittent(parse_injection_specs("model=bitflip,mode=intermittent,p=0.3"), 1);
  int fired = 0;
  for (int i = 0; i < 10000; ++i) fired += !intermittent.plan(point("p", 0)).empty();
  EXPECT_GT(fired, 2700);  // 3000 expected; 5 sigma is about 230
  EXPECT_LT(fired, 3300);
}

TEST(Injector, ModelsProduceTheirMasks) {
  Injector multibit(parse_injection_specs("model=multibit,bit=30,bits=3,index=2"), 1);
  EXPECT_EQ(multibit.plan(point("p", 0, 10, 32)).xors.at(0).mask, 7ULL << 29);  // moved down to fit 32 bits: 29..31
  Injector random(parse_injection_specs("model=random,count=50"), 1);
  for (const auto& x : random.plan(point("p", 0, 10, 16)).xors) {
    EXPECT_NE(x.mask, 0u);
    EXPECT_EQ(x.mask >> 16, 0u);
    EXPECT_LT(x.index, 10u);
  }
  Injector stuck(parse_injection_specs("model=stuck,bit=3,value=0"), 9);
  const Corruption s1 = stuck.plan(point("p", 0));
  const Corruption s2 = stuck.plan(point("p", 0));
  EXPECT_TRUE(s1.stuck);
  EXPECT_EQ(s1.stuck_index, s2.stuck_index);  // a stuck cell does not move
  EXPECT_EQ(s1.stuck_bit, 3u);
  EXPECT_FALSE(s1.stuck_value);
  Injector lane(parse_injection_specs("model=lane,lane=4,bit=9"), 1);
  const Corruption l = lane.plan(point("p", 0));
  EXPECT_TRUE(l.lane_mask);
  EXPECT_EQ(l.lane, 4u);
  EXPECT_EQ(l.mask, 1u << 9);
}

TEST(Injector, AfterDelaysTheOnset) {
  Injector permanent(parse_injection_specs("model=bitflip,after=3"), 1);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(permanent.plan(point("p", 0)).empty()) << i;
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(permanent.plan(point("p", 0)).empty()) << i;
  Injector transient(parse_injection_specs("model=bitflip,mode=transient,after=2"), 1);
  EXPECT_TRUE(transient.plan(point("p", 0)).empty());
  EXPECT_TRUE(transient.plan(point("p", 0)).empty());
  EXPECT_FALSE(transient.plan(point("p", 0)).empty());
  EXPECT_TRUE(transient.plan(point("p", 0)).empty());
  // Only matching points count towards the onset.
  Injector scoped(parse_injection_specs("model=bitflip,probe=alu.*,after=1"), 1);
  EXPECT_TRUE(scoped.plan(point("mem.march_c", 0)).empty());
  EXPECT_TRUE(scoped.plan(point("alu.fma32", 0)).empty());
  EXPECT_FALSE(scoped.plan(point("alu.fma32", 0)).empty());
}

TEST(Injector, BitIsTakenModuloTheElementWidth) {
  Injector inj(parse_injection_specs("model=bitflip,bit=40,index=0"), 1);
  EXPECT_EQ(inj.plan(point("p", 0, 4, 32)).xors.at(0).mask, 1u << 8);
}

TEST(InjectionSpec, ParsesHangAndCrash) {
  const auto specs = parse_injection_specs("model=hang,device=1,probe=mem.*;model=crash,mode=transient");
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[0].model, FaultModel::kHang);
  EXPECT_EQ(specs[0].device, "1");
  EXPECT_EQ(specs[1].model, FaultModel::kCrash);
  EXPECT_EQ(specs[1].mode, FaultMode::kTransient);
}

TEST(Injector, CrashKillsTheProcessOnlyAtAMatchingPoint) {
  Injector injector(parse_injection_specs("model=crash,device=1,probe=alu.*;model=hang,device=2"), 7);
  // Points that match neither spec return normally with nothing to corrupt.
  EXPECT_TRUE(injector.plan(point("alu.fma32", 0)).empty());
  EXPECT_TRUE(injector.plan(point("mem.march_c", 1)).empty());
  EXPECT_EXIT(injector.plan(point("alu.fma32", 1)), ::testing::KilledBySignal(SIGSEGV), "");
}

}  // namespace
}  // namespace sdc
