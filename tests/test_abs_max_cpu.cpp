// CPU abs_max variants against the independent reference (tests/abs_max_case.h).
#include <doctest/doctest.h>

#include <cmath>

#include "abs_max_case.h"
#include "test_util.h"

using test::AbsMaxInput;

namespace {

// amax of `in` by the CPU path (the poison 0xA5A5A5A5 left in place if nothing was written).
float cpu_abs_max(const AbsMaxInput &in, schedx_status *status) {
    const std::vector<uint8_t> bytes = in.bytes();
    test::Guarded x(bytes.size()), amax(4);
    std::memcpy(x.data(), bytes.data(), bytes.size());
    *status = schedx_abs_max(x.data(), in.m, in.k, in.ld, in.type, amax.as<float>(), SCHEDX_DEVICE_CPU, nullptr);
    CHECK_MESSAGE(*status == SCHEDX_OK, schedx_last_error());  // every input here is valid
    CHECK(x.guards_intact());
    CHECK(amax.guards_intact());
    return *amax.as<float>();
}

// Exact equality, or both NaN.
bool same(float got, float want) { return std::isnan(want) ? std::isnan(got) : ref::float_to_bits(got) == ref::float_to_bits(want); }

}  // namespace

TEST_CASE("abs_max: every bf16 and fp16 bit pattern alone, and in shuffled groups") {
    for (schedx_dtype t : {SCHEDX_BF16, SCHEDX_FP16}) {
        CAPTURE(t);
        for (uint32_t p = 0; p < 65536; p++) {
            AbsMaxInput in{t, 1, 1, 1, {p}};
            schedx_status s;
            const float got = cpu_abs_max(in, &s);
            REQUIRE(s == SCHEDX_OK);
            if (!same(got, in.want())) FAIL_CHECK("pattern 0x" << std::hex << p << ": got " << got << ", want " << in.want());
        }
        CHECK(schedx_last_variant("abs_max") == std::string(t == SCHEDX_BF16 ? "abs_max_bf16_cpu" : "abs_max_fp16_cpu"));
        // All patterns in a random order, cut into groups of 1 to 600, each a matrix of a
        // few rows: each group's maximum is a different pattern.
        std::vector<uint32_t> all(65536);
        std::iota(all.begin(), all.end(), 0u);
        std::mt19937 rng(11);
        std::shuffle(all.begin(), all.end(), rng);
        for (size_t at = 0; at < all.size();) {
            const int64_t rows = 1 + rng() % 3, k = 1 + rng() % 200;
            const size_t n = std::min(all.size() - at, size_t(rows * k));
            AbsMaxInput in{t, 1, int64_t(n), int64_t(n), {all.begin() + at, all.begin() + at + n}};
            if (n == size_t(rows * k)) in = {t, rows, k, k, in.bits};
            schedx_status s;
            const float got = cpu_abs_max(in, &s);
            REQUIRE(s == SCHEDX_OK);
            CHECK_MESSAGE(same(got, in.want()), "group at " << at << " of " << n << ": got " << got << ", want " << in.want());
            at += n;
        }
        // Everything but NaN: inf.
        std::vector<uint32_t> finite;
        for (uint32_t p = 0; p < 65536; p++) {
            if (!std::isnan(test::abs_value(t, p))) finite.push_back(p);
        }
        AbsMaxInput in{t, 1, int64_t(finite.size()), int64_t(finite.size()), finite};
        schedx_status s;
        CHECK(cpu_abs_max(in, &s) == INFINITY);
    }
}

TEST_CASE("abs_max: fp32 specials and random bits") {
    const uint32_t specials[] = {0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x00800000, 0x3F800000, 0xBF800001,
                                 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7F800001, 0xFFC00000, 0x7FFFFFFF};
    for (uint32_t p : specials) {
        AbsMaxInput in{SCHEDX_FP32, 1, 1, 1, {p}};
        schedx_status s;
        CHECK(same(cpu_abs_max(in, &s), in.want()));
    }
    std::mt19937 rng(5);
    for (int trial = 0; trial < 50; trial++) {
        AbsMaxInput in{SCHEDX_FP32, 17, 33, 33, std::vector<uint32_t>(17 * 33)};
        // Random bits without NaN (a NaN would decide every trial).
        for (uint32_t &b : in.bits) {
            do b = rng();
            while (std::isnan(ref::bits_to_float(b)));
        }
        schedx_status s;
        CHECK(same(cpu_abs_max(in, &s), in.want()));
    }
}

TEST_CASE("abs_max: ragged shapes and row pitches, padding never read") {
    for (schedx_dtype t : {SCHEDX_BF16, SCHEDX_FP16, SCHEDX_FP32}) {
        for (const test::Shape &sh : test::ragged_shapes()) {
            CAPTURE(t);
            CAPTURE(sh.m);
            CAPTURE(sh.k);
            CAPTURE(sh.ld);
            AbsMaxInput in = test::random_input(t, sh.m, sh.k, sh.ld, uint32_t(sh.m * 7919 + sh.k));
            schedx_status s;
            const float want = in.want();
            CHECK(same(cpu_abs_max(in, &s), want));
            // The largest value moved to the last element, then a NaN there.
            in.at(sh.m - 1, sh.k - 1) = t == SCHEDX_FP32 ? 0xC7000000u : t == SCHEDX_BF16 ? 0xC700u : 0xF800u;
            CHECK(same(cpu_abs_max(in, &s), in.want()));
            CHECK(in.want() > want);
            in.at(sh.m - 1, sh.k - 1) = t == SCHEDX_FP32 ? 0xFF800001u : t == SCHEDX_BF16 ? 0xFF81u : 0xFC01u;
            CHECK(std::isnan(cpu_abs_max(in, &s)));
        }
    }
}

TEST_CASE("abs_max: an empty input gives 0") {
    test::Guarded amax(4);
    for (auto [m, k] : {std::pair<int64_t, int64_t>{0, 5}, {5, 0}, {0, 0}}) {
        std::memset(amax.data(), 0xFF, 4);
        CHECK(schedx_abs_max(nullptr, m, k, k, SCHEDX_BF16, amax.as<float>(), SCHEDX_DEVICE_CPU, nullptr) == SCHEDX_OK);
        CHECK(ref::float_to_bits(*amax.as<float>()) == 0u);
    }
    CHECK(amax.guards_intact());
}

TEST_CASE("every CPU abs_max variant, forced: ragged and padded shapes, inf and NaN placed") {
    const std::vector<schedx_variant_info> infos = test::variant_infos("abs_max", "cpu");
    REQUIRE(infos.size() >= 3);
    for (const schedx_variant_info &info : infos) {
        auto p = test::params_of(info);
        const schedx_dtype t = p["in_type"] == "fp32" ? SCHEDX_FP32 : (p["in_type"] == "fp16" ? SCHEDX_FP16 : SCHEDX_BF16);
        CAPTURE(info.name);
        REQUIRE(schedx_force_variant("abs_max", info.name) == SCHEDX_OK);
        uint32_t seed = 1;
        for (const test::Shape &sh : test::ragged_shapes()) {
            AbsMaxInput in = test::random_input(t, sh.m, sh.k, sh.ld, seed++);
            CAPTURE(sh.m);
            CAPTURE(sh.k);
            // Last element inf, then NaN in the middle: the answer changes with each.
            for (int step = 0; step < 3; step++) {
                if (step == 1) in.at(sh.m - 1, sh.k - 1) = t == SCHEDX_FP32 ? 0xFF800000u : (t == SCHEDX_BF16 ? 0xFF80u : 0xFC00u);
                if (step == 2) in.at(sh.m / 2, sh.k / 2) = t == SCHEDX_FP32 ? 0x7FC00001u : (t == SCHEDX_BF16 ? 0x7FC1u : 0x7E01u);
                schedx_status s;
                const float got = cpu_abs_max(in, &s);
                REQUIRE(s == SCHEDX_OK);
                CHECK_MESSAGE(same(got, in.want()), "step " << step << ": got " << got << ", want " << in.want());
                CHECK(std::string(schedx_last_variant("abs_max")) == info.name);
            }
        }
    }
    CHECK(schedx_force_variant("abs_max", nullptr) == SCHEDX_OK);
}
