// Both operators from 8 threads at once on the CPU, each thread on a different shape,
// dtype and output set at any moment: every result must equal the serial run's, byte for
// byte, and schedx_last_variant must report the thread's own call. Concurrent appends to
// the tuning database by several processes are covered in test_tuning_db.cpp ("concurrent
// appends from several processes lose nothing and tear no line").
#include <doctest/doctest.h>

#include <set>

#include "concurrency_cases.h"

namespace {

using namespace concurrency;

constexpr int kIterations = 400;  // per thread and test: a few seconds on 2 cores

CtResult run(const CtCase &c) {
    CtResult r;
    r.rows.assign(c.rows ? size_t(c.m * c.k) : 0, test::kPoison);
    r.cols.assign(c.cols ? size_t(c.m * c.k) : 0, test::kPoison);
    r.status = schedx_cast_transpose_fp8(c.x.data(), c.m, c.k, c.k, c.dtype, &c.scale, c.format,
                                         c.rows ? r.rows.data() : nullptr, c.k, c.cols ? r.cols.data() : nullptr, c.m,
                                         c.amax ? &r.amax : nullptr, c.amax ? &r.scale_inv : nullptr,
                                         SCHEDX_DEVICE_CPU, nullptr);
    const char *v = schedx_last_variant("cast_transpose");
    r.variant = v ? v : "";
    return r;
}

W8Result run(const W8Case &c) {
    W8Result r;
    r.y.assign(size_t(c.m * c.n * 2), test::kPoison);
    r.status = schedx_w8_linear(c.x.data(), c.m, c.k, c.k, c.x_dtype, c.w.data(), c.n, c.k, c.scales.data(),
                                c.scales_dtype, c.bias ? c.bias_values.data() : nullptr, r.y.data(), c.n,
                                SCHEDX_DEVICE_CPU, nullptr);
    const char *v = schedx_last_variant("w8_linear");
    r.variant = v ? v : "";
    return r;
}

}  // namespace

TEST_CASE("8 threads calling both operators with different shapes match the serial run") {
    const std::vector<CtCase> ct = ct_cases();
    const std::vector<W8Case> w8 = w8_cases();
    std::vector<CtResult> ct_serial;
    std::vector<W8Result> w8_serial;
    for (const CtCase &c : ct) ct_serial.push_back(run(c));
    for (const W8Case &c : w8) w8_serial.push_back(run(c));
    for (const CtResult &r : ct_serial) REQUIRE(r.status == SCHEDX_OK);
    for (const W8Result &r : w8_serial) REQUIRE(r.status == SCHEDX_OK);
    // The cases dispatch to several variants, so a shared last_variant would show.
    CHECK(std::set<std::string>{ct_serial[0].variant, ct_serial[1].variant, ct_serial[2].variant}.size() == 3);

    Failures failures;
    on_threads(kIterations, [&](int t, int i) {
        // At any moment thread t is on case (t + i) mod 8: all eight cases run at once.
        const size_t c = size_t(t + i) % ct.size(), w = size_t(t + 3 * i) % w8.size();
        if (!(run(ct[c]) == ct_serial[c])) failures.add("cast_transpose case " + std::to_string(c));
        if (!(run(w8[w]) == w8_serial[w])) failures.add("w8_linear case " + std::to_string(w));
    });
    failures.report();
}

TEST_CASE("forcing from several threads: process-wide, and last_variant stays per thread") {
    // bf16 -> fp8 with both outputs and amax: both CPU variants serve it, bit-identically.
    const std::vector<CtCase> ct = ct_cases();
    const CtCase &c = ct[0];
    const std::vector<std::string> names{"cast_transpose_bf16_cpu", "cast_transpose_bf16_cpu_amax"};
    CtResult serial = run(c);
    REQUIRE(serial.status == SCHEDX_OK);
    const std::vector<W8Case> w8 = w8_cases();
    std::vector<W8Result> w8_serial;
    for (const W8Case &w : w8) w8_serial.push_back(run(w));

    REQUIRE(schedx_force_variant("cast_transpose", names[0].c_str()) == SCHEDX_OK);
    Failures failures;
    on_threads(kIterations, [&](int t, int i) {
        // Even threads force, odd threads only call: what runs is whichever name was forced
        // last by any thread, and the caller's last_variant names exactly what its call ran.
        if (t % 2 == 0 && schedx_force_variant("cast_transpose", names[size_t(t / 2 + i) % 2].c_str()) != SCHEDX_OK) {
            failures.add(std::string("force_variant: ") + schedx_last_error());
        }
        CtResult r = run(c);
        if (r.variant != names[0] && r.variant != names[1]) failures.add("ran " + r.variant);
        if (std::string(schedx_last_reason("cast_transpose")) != "forced") failures.add("reason not forced");
        r.variant = serial.variant;
        if (!(r == serial)) failures.add("forced cast_transpose result differs");
        // Forcing cast_transpose leaves w8_linear's dispatch alone.
        const size_t w = size_t(t + i) % w8.size();
        if (!(run(w8[w]) == w8_serial[w])) failures.add("w8_linear case " + std::to_string(w));
    });
    REQUIRE(schedx_force_variant("cast_transpose", nullptr) == SCHEDX_OK);
    failures.report();
    CHECK(run(c) == serial);
}

namespace {

// quantize_fp8 and abs_max on the CPU: the axiswise two-pass variant takes a host scratch per
// call, the block recipes none; each case's x is a pure function of its index.
struct QuantizeOutputs {
    schedx_status status;
    std::vector<uint8_t> rows, cols, rows_scale, cols_scale;
    float amax = 0;
    bool operator==(const QuantizeOutputs &o) const {
        return status == o.status && rows == o.rows && cols == o.cols && rows_scale == o.rows_scale &&
               cols_scale == o.cols_scale && std::memcmp(&amax, &o.amax, 4) == 0;
    }
};

QuantizeOutputs run_quantize(const CtCase &c, schedx_fp8_recipe recipe) {
    QuantizeOutputs r;
    const schedx_quantize_fp8_options o{recipe, c.format, 1, 0.0f, SCHEDX_MX_RCEIL};
    const int sb = recipe == SCHEDX_RECIPE_MXFP8 ? 1 : 4;
    int64_t rr = 0, rc = 0, cr = 0, cc = 0;
    // No doctest assertion here: this runs on the worker threads.
    r.status = schedx_quantize_fp8_scale_shape(recipe, c.m, c.k, 0, &rr, &rc);
    if (r.status == SCHEDX_OK) r.status = schedx_quantize_fp8_scale_shape(recipe, c.m, c.k, 1, &cr, &cc);
    if (r.status != SCHEDX_OK) return r;
    r.rows.assign(size_t(c.m * c.k), test::kPoison);
    r.cols.assign(size_t(c.m * c.k), test::kPoison);
    r.rows_scale.assign(size_t(rr * rc * sb), test::kPoison);
    r.cols_scale.assign(size_t(cr * cc * sb), test::kPoison);
    r.status = schedx_quantize_fp8(c.x.data(), c.m, c.k, c.k, c.dtype, &o, r.rows.data(), c.k, r.rows_scale.data(),
                                   r.cols.data(), c.m, r.cols_scale.data(), SCHEDX_DEVICE_CPU, nullptr);
    if (r.status == SCHEDX_OK) {
        r.status = schedx_abs_max(c.x.data(), c.m, c.k, c.k, c.dtype, &r.amax, SCHEDX_DEVICE_CPU, nullptr);
    }
    return r;
}

}  // namespace

TEST_CASE("8 threads calling quantize_fp8 (every recipe) and abs_max match the serial run") {
    const std::vector<CtCase> ct = ct_cases();
    const schedx_fp8_recipe recipes[] = {SCHEDX_RECIPE_BLOCK_1X128, SCHEDX_RECIPE_BLOCK_128X128, SCHEDX_RECIPE_MXFP8,
                                         SCHEDX_RECIPE_AXISWISE};
    std::vector<QuantizeOutputs> serial;
    for (size_t i = 0; i < ct.size(); i++) {
        serial.push_back(run_quantize(ct[i], recipes[i % 4]));
        REQUIRE(serial.back().status == SCHEDX_OK);
    }
    Failures failures;
    on_threads(kIterations / 4, [&](int t, int i) {
        const size_t c = size_t(t + i) % ct.size();
        if (!(run_quantize(ct[c], recipes[c % 4]) == serial[c])) failures.add("quantize_fp8 case " + std::to_string(c));
    });
    failures.report();
}
