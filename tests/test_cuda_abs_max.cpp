// Every CUDA abs_max variant against the independent reference (tests/abs_max_case.h):
// bf16/fp16 patterns by magnitude, random values, ragged shapes and pitches, several blocks.
// Exits 77 (ctest: skipped) without a CUDA device.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "abs_max_case.h"
#include "cuda_test_support.h"

using test::AbsMaxInput;
using test::DeviceCopy;
using test::params_of;
using test::test_stream;

namespace {

// amax of `in` through guarded device copies on test_stream. amax starts as the largest
// finite float, so a call that does not zero it first shows.
float cuda_abs_max(const AbsMaxInput &in, schedx_status *status) {
    const std::vector<uint8_t> bytes = in.bytes();
    test::Guarded hx(std::max<size_t>(bytes.size(), 1)), hamax(4);
    std::memcpy(hx.data(), bytes.data(), bytes.size());
    *hamax.as<uint32_t>() = 0x7F7FFFFFu;
    DeviceCopy x(&hx), amax(&hamax);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);  // test_stream may not wait for the legacy stream
    *status = schedx_abs_max(x.ptr(), in.m, in.k, in.ld, in.type, amax.as<float>(), SCHEDX_DEVICE_CUDA, test_stream);
    REQUIRE(cudaStreamSynchronize(test_stream) == cudaSuccess);
    amax.back();
    CHECK_MESSAGE(x.guards_intact(), "device guard bytes overwritten");
    CHECK_MESSAGE(amax.guards_intact(), "device guard bytes overwritten");
    return *hamax.as<float>();
}

bool same(float got, float want) { return std::isnan(want) ? std::isnan(got) : ref::float_to_bits(got) == ref::float_to_bits(want); }

schedx_dtype dtype_of(std::map<std::string, std::string> &p) {
    return p["in_type"] == "fp32" ? SCHEDX_FP32 : p["in_type"] == "fp16" ? SCHEDX_FP16 : SCHEDX_BF16;
}

// What the word variants need (the runtime's can_run, restated): 16-byte rows; the device
// copies are 16-byte aligned.
bool word_variant_runs(schedx_dtype t, int64_t k, int64_t ld) {
    const int eb = test::elem_bytes_of(t);
    return (k * eb) % 16 == 0 && (ld * eb) % 16 == 0;
}

}  // namespace

TEST_CASE("every CUDA abs_max variant: bf16 and fp16 patterns by magnitude") {
    for (const schedx_variant_info &info : test::variant_infos("abs_max", "cuda")) {
        auto p = params_of(info);
        const schedx_dtype t = dtype_of(p);
        if (t == SCHEDX_FP32) continue;
        CAPTURE(info.name);
        REQUIRE(schedx_force_variant("abs_max", info.name) == SCHEDX_OK);
        // All 65,536 patterns, shuffled, as 64 x 1024: NaN; without NaN: inf.
        std::vector<uint32_t> all(65536);
        std::iota(all.begin(), all.end(), 0u);
        std::mt19937 rng(3);
        std::shuffle(all.begin(), all.end(), rng);
        AbsMaxInput in{t, 64, 1024, 1024, all};
        schedx_status s;
        CHECK(std::isnan(cuda_abs_max(in, &s)));
        REQUIRE(s == SCHEDX_OK);
        CHECK(schedx_last_variant("abs_max") == std::string(info.name));
        // Patterns up to a magnitude (the rest 0): the answer is that magnitude, for 256
        // magnitudes across the sorted patterns (subnormals, normals, the largest finite, inf).
        std::vector<uint32_t> by_size;
        for (uint32_t b = 0; b < 65536; b++) {
            if (!std::isnan(test::abs_value(t, b))) by_size.push_back(b);
        }
        std::stable_sort(by_size.begin(), by_size.end(),
                         [&](uint32_t a, uint32_t b) { return test::abs_value(t, a) < test::abs_value(t, b); });
        for (size_t step = 0; step <= 256; step++) {
            const size_t top = std::min(by_size.size() - 1, step * (by_size.size() - 1) / 256 + (step % 3));
            const double limit = test::abs_value(t, by_size[top]);
            AbsMaxInput part = in;
            for (uint32_t &b : part.bits) {
                const double a = test::abs_value(t, b);
                if (std::isnan(a) || a > limit) b = 0;
            }
            const float got = cuda_abs_max(part, &s);
            CHECK_MESSAGE(same(got, float(limit)), "limit pattern 0x" << std::hex << by_size[top] << ": got " << got);
        }
    }
}

TEST_CASE("every CUDA abs_max variant: ragged shapes, row pitches, maxima at the edges, NaN") {
    std::vector<test::Shape> shapes = test::ragged_shapes();
    shapes.push_back({1000, 3000, 3008});  // several blocks each way, words when 16-byte rows
    shapes.push_back({4100, 520, 520});
    for (const schedx_variant_info &info : test::variant_infos("abs_max", "cuda")) {
        auto p = params_of(info);
        const schedx_dtype t = dtype_of(p);
        const bool words = p["schedule"] == "cuda";
        CAPTURE(info.name);
        REQUIRE(schedx_force_variant("abs_max", info.name) == SCHEDX_OK);
        int ran = 0;
        for (const test::Shape &sh : shapes) {
            if (words && !word_variant_runs(t, sh.k, sh.ld)) continue;
            if (test::quick_run() && ran > 1) break;
            ran++;
            CAPTURE(sh.m);
            CAPTURE(sh.k);
            CAPTURE(sh.ld);
            AbsMaxInput in = test::random_input(t, sh.m, sh.k, sh.ld, uint32_t(sh.m * 31 + sh.k));
            schedx_status s;
            CHECK(same(cuda_abs_max(in, &s), in.want()));
            REQUIRE(s == SCHEDX_OK);
            // A larger value at each corner and in the middle, then a NaN there.
            const uint32_t big = t == SCHEDX_FP32 ? 0xC7000000u : t == SCHEDX_BF16 ? 0xC700u : 0xF800u;
            const uint32_t nan = t == SCHEDX_FP32 ? 0xFF800001u : t == SCHEDX_BF16 ? 0xFF81u : 0xFC01u;
            const std::pair<int64_t, int64_t> spots[] = {{0, 0}, {0, sh.k - 1}, {sh.m - 1, 0}, {sh.m - 1, sh.k - 1}, {sh.m / 2, sh.k / 2}};
            for (auto [i, j] : spots) {
                CAPTURE(i);
                CAPTURE(j);
                const uint32_t keep = in.at(i, j);
                in.at(i, j) = big;
                CHECK(same(cuda_abs_max(in, &s), 32768.0f));
                in.at(i, j) = nan;
                CHECK(std::isnan(cuda_abs_max(in, &s)));
                in.at(i, j) = keep;
            }
        }
        CHECK(ran > 0);
    }
    REQUIRE(schedx_force_variant("abs_max", nullptr) == SCHEDX_OK);
}

TEST_CASE("abs_max dispatch: 16-byte rows take a word variant, others the general one; empty gives 0") {
    schedx_status s;
    AbsMaxInput aligned = test::random_input(SCHEDX_BF16, 64, 512, 512, 1);
    CHECK(same(cuda_abs_max(aligned, &s), aligned.want()));
    CHECK(test::schedule_of_last("abs_max") == "cuda");
    AbsMaxInput odd = test::random_input(SCHEDX_BF16, 64, 513, 513, 1);
    CHECK(same(cuda_abs_max(odd, &s), odd.want()));
    CHECK(test::schedule_of_last("abs_max") == "cuda_general");
    AbsMaxInput empty{SCHEDX_BF16, 0, 16, 16, {}};
    CHECK(ref::float_to_bits(cuda_abs_max(empty, &s)) == 0u);
    CHECK(s == SCHEDX_OK);
}

int main(int argc, char **argv) { return test::cuda_test_main(argc, argv); }
