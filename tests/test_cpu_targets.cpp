// CPU variants are built for AVX-512 and for the AVX2 baseline (variants.json's targets.cpu),
// Halide's wrapper taking the first the CPU has. ctest runs the CPU variant tests a second
// time with SCHEDX_CPU_BASELINE=1 (schedx_tests_cpu_baseline), where the AVX2 code must run
// and pass on this AVX-512 machine too.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "pipeline_call.h"
#include "w8_linear_case.h"

TEST_CASE("CPU targets: SCHEDX_CPU_BASELINE=1 refuses every target above the baseline, and only then") {
    // A variant not called before in this process: the wrapper asks at each pipeline's first call.
    REQUIRE(schedx_force_variant("w8_linear", "w8_linear_bf16_sbf16_cpu_b4_r2") == SCHEDX_OK);
    CHECK(test::check_w8_linear({5, 40, 72}, 3).error == "");
    CHECK(schedx_force_variant("w8_linear", nullptr) == SCHEDX_OK);
    const char *env = std::getenv("SCHEDX_CPU_BASELINE");
    if (env && std::strcmp(env, "1") == 0) {
        CHECK(schedx::cpu_targets_refused() > 0);
    } else {
        CHECK(schedx::cpu_targets_refused() == 0);
    }
}

TEST_CASE("CPU targets: untuned w8_linear takes a register tile that fits the running build's vector registers") {
    // M = 16: cpu_b4 (4 x 4 sums, 21 vectors) with AVX-512's 32 registers, cpu_b4_r3 (16) with
    // AVX2's 16, where cpu_b4 spills; the same rule picks cpu_r8 (10) at M = 1 on both.
    const int registers = schedx::cpu_vector_registers();
    const char *env = std::getenv("SCHEDX_CPU_BASELINE");
    if (env && std::strcmp(env, "1") == 0) CHECK(registers == 16);
    CHECK((registers == 16 || registers == 32));
    CHECK(test::check_w8_linear({16, 96, 256}, 11).error == "");
    CHECK(std::string(schedx_last_variant("w8_linear")) ==
          (registers == 32 ? "w8_linear_bf16_sbf16_cpu_b4" : "w8_linear_bf16_sbf16_cpu_b4_r3"));
    CHECK(test::check_w8_linear({4, 96, 256}, 13).error == "");
    CHECK(std::string(schedx_last_variant("w8_linear")) ==
          (registers == 32 ? "w8_linear_bf16_sbf16_cpu_b4" : "w8_linear_bf16_sbf16_cpu_b4_r3"));
    CHECK(test::check_w8_linear({1, 96, 256}, 12).error == "");
    CHECK(std::string(schedx_last_variant("w8_linear")) == "w8_linear_bf16_sbf16_cpu_r8");
    // The same tiles for a bias, fp32 scales (torchao's, through schedx.inductor) and fp16 x.
    const std::string tile = registers == 32 ? "cpu_b4" : "cpu_b4_r3";
    struct Types {
        schedx_dtype x, scales;
        bool bias;
        const char *name;
    };
    for (const Types t : {Types{SCHEDX_BF16, SCHEDX_BF16, true, "bf16_sbf16_bias"}, Types{SCHEDX_BF16, SCHEDX_FP32, false, "bf16_sfp32"},
                          Types{SCHEDX_FP16, SCHEDX_FP32, false, "fp16_sfp32"}, Types{SCHEDX_FP16, SCHEDX_FP32, true, "fp16_sfp32_bias"}}) {
        CAPTURE(t.name);
        for (const int64_t m : {1, 16}) {
            test::W8LinearCase c{m, 96, 256};
            c.x_dtype = t.x, c.scales_dtype = t.scales, c.bias = t.bias;
            CHECK(test::check_w8_linear(c, 14).error == "");
            CHECK(std::string(schedx_last_variant("w8_linear")) ==
                  std::string("w8_linear_") + t.name + "_" + (m == 1 ? "cpu_r8" : tile));
        }
    }
}

namespace {

std::atomic<int> caller_loops{0};
std::atomic<int64_t> caller_tasks{0};

// A caller's pool as the torch ops install it (torch_parallel_for's shape): here two chunks, in turn.
int32_t counting_parallel_for(int64_t begin, int64_t end, int64_t, void (*body)(int64_t, int64_t, void *), void *ctx) {
    caller_loops++;
    caller_tasks += end - begin;
    const int64_t mid = begin + (end - begin) / 2;
    body(begin, mid, ctx);
    body(mid, end, ctx);
    return 0;
}

}  // namespace

TEST_CASE("CPU pool: schedx_set_parallel_for runs the parallel loops of calls of 256 KiB or more on the caller's "
          "pool, smaller ones on the calling thread; NULL returns to Halide's") {
    schedx_set_parallel_for(counting_parallel_for);
    REQUIRE(schedx_force_variant("w8_linear", "w8_linear_bf16_sbf16_cpu_r8") == SCHEDX_OK);
    // N = 1000, K = 264: W alone 258 KiB; 32 tiles of 32 W rows (4 x R = 8), the last one partial.
    CHECK(test::check_w8_linear({1, 1000, 264}, 5).error == "");
    CHECK(caller_loops.load() > 0);
    CHECK(caller_tasks.load() >= 32);
    // N = 200, K = 72: 14 KiB of operands, so the loop runs on this thread.
    int loops = caller_loops.load();
    CHECK(test::check_w8_linear({1, 200, 72}, 6).error == "");
    CHECK(caller_loops.load() == loops);
    schedx_set_parallel_for(nullptr);
    loops = caller_loops.load();
    CHECK(test::check_w8_linear({1, 1000, 264}, 7).error == "");
    CHECK(caller_loops.load() == loops);
    CHECK(schedx_force_variant("w8_linear", nullptr) == SCHEDX_OK);
}

TEST_CASE("CPU pool: schedx_set_num_threads takes a count of at least 1") {
    CHECK(schedx_set_num_threads(0) == SCHEDX_ERR_BAD_SIZE);
    CHECK(std::string(schedx_last_error()).find("n is 0") != std::string::npos);
    CHECK(schedx_set_num_threads(1) == SCHEDX_OK);
    CHECK(test::check_w8_linear({4, 40, 72}, 7).error == "");
    CHECK(schedx_set_num_threads(2) == SCHEDX_OK);
    CHECK(test::check_w8_linear({4, 40, 72}, 8).error == "");
}
