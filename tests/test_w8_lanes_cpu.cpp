// The algorithm of w8_linear's CUDA lane kernels (GEMV, small batch; K tails, 4-byte
// vectors and element I/O) on the CPU: the same generator code with default_schedule=true, built as test
// libraries (tests/CMakeLists.txt), against the fp64 reference. What a GPU alone can check
// is the schedule's mapping (lanes, shuffles, vector loads); the indexing, the clamps of rows
// past N and M, and the tail's guard are checked here.
#include <doctest/doctest.h>

#include "check_library.h"
#include "w8_linear_call.h"
#include "w8_linear_case.h"
#include "w8_lanes_element.h"
#include "w8_lanes_element_fp16_bias.h"
#include "w8_lanes_runs.h"
#include "w8_lanes_v1_tail.h"
#include "w8_lanes_v2_tail.h"
#include "w8_lanes_v4_tail.h"
#include "w8_lanes_v4_tail_fp16_bias.h"

namespace {

struct Lanes {
    test::CheckLibrary library;
    schedx_dtype x_dtype, scales_dtype;
    bool bias;
    int64_t k_granule;  // K in whole vectors (k_tail) or whole steps
    int64_t x_pad;      // elements of row padding that keep x's rows a vector apart
    int64_t w_pad;      // ... and W's (odd for element I/O: rows 1-byte aligned)
};

const Lanes kLanes[] = {
    {SCHEDX_CHECK_LIBRARY(w8_lanes_v1_tail), SCHEDX_BF16, SCHEDX_BF16, false, 4, 4, 16},
    {SCHEDX_CHECK_LIBRARY(w8_lanes_v2_tail), SCHEDX_BF16, SCHEDX_BF16, false, 8, 8, 16},
    {SCHEDX_CHECK_LIBRARY(w8_lanes_v4_tail), SCHEDX_BF16, SCHEDX_BF16, false, 16, 8, 16},
    {SCHEDX_CHECK_LIBRARY(w8_lanes_v4_tail_fp16_bias), SCHEDX_FP16, SCHEDX_FP32, true, 16, 8, 16},
    {SCHEDX_CHECK_LIBRARY(w8_lanes_runs), SCHEDX_BF16, SCHEDX_BF16, false, 512, 8, 16},
    {SCHEDX_CHECK_LIBRARY(w8_lanes_element), SCHEDX_BF16, SCHEDX_BF16, false, 1, 1, 3},
    {SCHEDX_CHECK_LIBRARY(w8_lanes_element_fp16_bias), SCHEDX_FP16, SCHEDX_FP32, true, 1, 1, 3},
};

schedx::Variant variant_of(const Lanes &l) { return test::check_library_variant(l.library, "w8_linear"); }

// Runs the case through the runtime's binding of a one-pipeline w8_linear variant.
test::W8LinearRunner runner_of(const schedx::Variant &v) {
    return [&v](const test::W8LinearCase &c, test::W8LinearBuffers &b) {
        const schedx::W8LinearCall call_args{b.x->data(), c.m, c.k, c.ldx, b.w->as<int8_t>(), c.n, c.ldw,
                                             b.scales->data(), c.bias ? b.bias->data() : nullptr,
                                             c.scales_dtype == SCHEDX_FP32 ? 4 : 2, b.y->data(), c.ldy};
        schedx::PipelineCall call(v, nullptr);
        schedx::bind_linear(call, call_args);
        return call.run();
    };
}

}  // namespace

TEST_CASE("w8_linear lane layout on the CPU: K tails, 4-byte vectors, element I/O, rows past N and M, padded rows") {
    for (const Lanes &l : kLanes) {
        const schedx::Variant v = variant_of(l);
        CAPTURE(l.library.name);
        // K: below one step, one granule, steps plus a tail (4100 = Falcon-style 4 past 4096,
        // 4544 = Falcon-7B's hidden size), whole steps; the no-tail library takes whole steps only.
        std::vector<int64_t> ks = {l.k_granule, 3 * l.k_granule, 4096 + l.k_granule, 4544, 4096, 1000};
        if (l.k_granule == 512) ks = {512, 4096};
        // Element I/O: any K, odd ones (11009 = 11008 + 1, Llama's MLP width plus one) and
        // below one lane's run included; rows then 1-byte (W) and 2-byte (x) aligned.
        if (l.k_granule == 1) ks = {1, 2, 31, 33, 255, 1025, 4100, 4545, 11009};
        for (int64_t k : ks) {
            if (k % l.k_granule != 0) continue;
            for (int64_t m : {1, 3, 17}) {
                for (int64_t n : {1, 5, 64}) {
                    CAPTURE(k);
                    CAPTURE(m);
                    CAPTURE(n);
                    for (bool padded : {false, true}) {
                        CAPTURE(padded);
                        test::W8LinearCase c{m, n, k};
                        c.x_dtype = l.x_dtype;
                        c.scales_dtype = l.scales_dtype;
                        c.bias = l.bias;
                        if (padded) {
                            c.ldx = k + l.x_pad;
                            c.ldw = k + l.w_pad;
                            c.ldy = n + 3;
                        }
                        CHECK(test::check_w8_linear(c, 0, runner_of(v)).error == "");
                        c.integer = false;
                        CHECK(test::check_w8_linear(c, 1, runner_of(v)).error == "");
                    }
                }
            }
        }
    }
}

TEST_CASE("w8_linear lane layout on the CPU: K off the granule is refused by the pipeline, not read past") {
    const schedx::Variant v = variant_of(kLanes[1]);  // 8-element vectors
    test::W8LinearCase c{1, 8, 4100};                 // 4100 = 512 vectors + 4 elements
    const std::string error = test::check_w8_linear(c, 0, runner_of(v)).error;
    // The pipeline's own constraint on W's pitch (in whole vectors), before any read; y untouched.
    CHECK(error.rfind("status 13: w8_lanes_v2_tail failed (Halide error -8): Constraint violated: w.stride.1", 0) == 0);
    CHECK(error.find("was written") == std::string::npos);
}
