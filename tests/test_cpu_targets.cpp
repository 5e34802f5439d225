// CPU variants are built for AVX-512 and for the AVX2 baseline (variants.json's targets.cpu),
// Halide's wrapper taking the first the CPU has. ctest runs the CPU variant tests a second
// time with SCHEDX_CPU_BASELINE=1 (schedx_tests_cpu_baseline), where the AVX2 code must run
// and pass on this AVX-512 machine too.
#include <doctest/doctest.h>

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
