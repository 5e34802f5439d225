// CPU variants of the weight-only int8 linear against an fp64 reference: integer-valued
// cases that must match bit for bit, random cases within a relative error bound, edge
// shapes, padded leading dimensions, poisoned outputs and guard bytes.
#include <doctest/doctest.h>

#include <algorithm>

#include "cublas_gemm.h"
#include "w8_linear_case.h"

using test::Guarded;
using W8Case = test::W8LinearCase;
using W8Result = test::W8LinearResult;

namespace {

W8Result check_w8(const W8Case &c, uint32_t seed) { return test::check_w8_linear(c, seed); }

const schedx_dtype kXTypes[] = {SCHEDX_BF16, SCHEDX_FP16};
const schedx_dtype kScaleTypes[] = {SCHEDX_BF16, SCHEDX_FP32};

}  // namespace

TEST_CASE("w8_linear: integer inputs match exactly, edge shapes, bias on and off") {
    struct Shape {
        int64_t n, k, ldx, ldw, ldy;
    };
    const Shape shapes[] = {{1, 1, 0, 0, 0},     {1, 37, 0, 0, 0},   {33, 100, 0, 0, 0},
                            {64, 256, 0, 0, 0},  {7, 45, 50, 48, 9}, {40, 300, 301, 333, 41}};
    uint32_t seed = 1;
    for (schedx_dtype xt : kXTypes) {
        for (schedx_dtype st : kScaleTypes) {
            for (bool bias : {false, true}) {
                for (int64_t m : {1, 2, 3, 5, 16, 17}) {
                    for (const Shape &s : shapes) {
                        CAPTURE(xt);
                        CAPTURE(st);
                        CAPTURE(bias);
                        CAPTURE(m);
                        CAPTURE(s.n);
                        CAPTURE(s.k);
                        W8Case c{m, s.n, s.k, s.ldx, s.ldw, s.ldy, xt, st, bias, true};
                        CHECK(check_w8(c, seed++).error == "");
                    }
                }
            }
        }
    }
}

TEST_CASE("w8_linear: random inputs within 1e-2 of an fp64 reference") {
    double worst = 0;
    uint32_t seed = 100;
    for (schedx_dtype xt : kXTypes) {
        for (schedx_dtype st : kScaleTypes) {
            for (bool bias : {false, true}) {
                for (int64_t m : {1, 2, 3, 5, 16, 17}) {
                    for (auto nk : {std::pair<int64_t, int64_t>{1, 1000}, {40, 37}, {129, 300}, {16, 4096}}) {
                        CAPTURE(xt);
                        CAPTURE(st);
                        CAPTURE(bias);
                        CAPTURE(m);
                        CAPTURE(nk.first);
                        CAPTURE(nk.second);
                        W8Case c{m, nk.first, nk.second, 0, 0, 0, xt, st, bias, false};
                        const W8Result r = check_w8(c, seed++);
                        CHECK(r.error == "");
                        worst = std::max(worst, r.max_rel);
                    }
                }
            }
        }
    }
    MESSAGE("w8_linear CPU: largest elementwise relative error against fp64: " << worst);
    CHECK(worst <= 1e-2);
}

TEST_CASE("w8_linear: every CPU variant, forced") {
    const std::vector<schedx_variant_info> infos = test::variant_infos("w8_linear", "cpu");
    CHECK(infos.size() == 30);  // the generic tile in 8 type combinations, 4 tiles in 5, 2 autoschedulers
    for (const schedx_variant_info &info : infos) {
        const std::string p = std::string(" ") + info.params + " ";
        W8Case c{5, 33, 100, 0, 0, 40};
        c.x_dtype = p.find(" x_type=fp16 ") != std::string::npos ? SCHEDX_FP16 : SCHEDX_BF16;
        c.scales_dtype = p.find(" scale_type=fp32 ") != std::string::npos ? SCHEDX_FP32 : SCHEDX_BF16;
        c.bias = p.find(" with_bias=true ") != std::string::npos;
        CAPTURE(info.name);
        REQUIRE(schedx_force_variant("w8_linear", info.name) == SCHEDX_OK);
        if (p.find(" autoscheduler=") != std::string::npos) {
            // Autoscheduled: refuses shapes its generated bounds do not accept (tiles shifted
            // inwards need the split factors), with a status, and runs a shape as large as them.
            const std::string small = check_w8(c, 7).error;
            CHECK((small.empty() || small.find("status 11") == 0));
            c = W8Case{16, 256, 4096, 0, 0, 264, c.x_dtype, c.scales_dtype, c.bias};
        }
        CHECK(check_w8(c, 7).error == "");
        CHECK(schedx_last_variant("w8_linear") == std::string(info.name));
        CHECK(schedx_last_reason("w8_linear") == std::string("forced"));
        if (p.find(" autoscheduler=") == std::string::npos) {
            // A register tile's edges: N = 37 in no whole tile of 2, 3, 4 or 8 rows of W (nor
            // 4 of them), M = 6 past a batch of 4, K = 1001 off the vector.
            W8Case edge{6, 37, 1001, 0, 0, 0, c.x_dtype, c.scales_dtype, c.bias};
            CHECK(check_w8(edge, 8).error == "");
        }
        // A variant of another dtype or bias setting does not serve the call.
        W8Case other = c;
        other.bias = !c.bias;
        CHECK(check_w8(other, 7).error.find("status 11") == 0);
    }
    // The batch-4 CPU schedule computes 4 rows per pass, so it refuses fewer.
    REQUIRE(schedx_force_variant("w8_linear", "w8_linear_bf16_sbf16_cpu_b4") == SCHEDX_OK);
    CHECK(check_w8({3, 33, 100}, 1).error.find("status 11") == 0);
    CHECK(schedx_force_variant("w8_linear", nullptr) == SCHEDX_OK);
    CHECK(check_w8({2, 3, 4}, 1).error == "");
    CHECK(schedx_last_variant("w8_linear") == std::string("w8_linear_bf16_sbf16_cpu_r8"));
    // From M = 4 untuned dispatch takes a batch-4 tile that fits the registers: test_cpu_targets.cpp.
}

// A planes variant's cublaslt_config is read at call time: a malformed one would quietly
// run cublasGemmEx's pick instead of the configuration the variant is named after.
TEST_CASE("w8_linear: cublaslt_config strings parse, and every registered one does") {
    schedx::CublasLtConfig cfg;
    REQUIRE(schedx::parse_cublaslt_config("21,15,24", &cfg));
    CHECK(cfg.algo == 21);
    CHECK(cfg.tile == 15);
    CHECK(cfg.stages == 24);
    for (const char *bad : {"", "21,15", "21,15,24,1", "21,15,24x", "a,15,24", "21,0,24", "-1,15,24"}) {
        CAPTURE(bad);
        CHECK_FALSE(schedx::parse_cublaslt_config(bad, &cfg));
    }
    int pinned = 0;
    for (const schedx_variant_info &v : test::variant_infos("w8_linear", "cuda")) {
        const auto params = test::params_of(v);
        const auto config = params.find("cublaslt_config");
        if (config == params.end()) continue;
        CAPTURE(v.name);
        CHECK(schedx::parse_cublaslt_config(config->second, &cfg));
        pinned++;
    }
    CHECK(pinned >= 2);
}

// The CUDA two-stage paths find their helper stage in the w8_linear_epilogue list by dtype
// kind at run time: variants.json must hold one of each for every kind a path serves, or
// a call fails with SCHEDX_ERR_NO_VARIANT on the GPU only. Checked here, without one.
TEST_CASE("w8_linear: every CUDA epilogue kind the cuBLAS and planes paths look up is registered") {
    auto has = [](const schedx_variant_info &info, const std::string &kv) {
        const auto params = test::params_of(info);
        const auto it = params.find(kv.substr(0, kv.find('=')));
        return it != params.end() && it->second == kv.substr(kv.find('=') + 1);
    };
    const std::vector<schedx_variant_info> epilogues = test::all_variant_infos("w8_linear_epilogue", "cuda");
    int paths = 0;
    for (const schedx_variant_info &path : test::variant_infos("w8_linear", "cuda")) {
        const bool planes = has(path, "stage=planes"), dequantize = has(path, "stage=dequantize");
        if (!planes && !dequantize) continue;
        paths++;
        for (const char *x : {"bf16", "fp16"}) {
            if (!has(path, std::string("x_type=") + x)) continue;
            for (const char *scale : {"bf16", "fp32"}) {
                for (bool bias : {false, true}) {
                    CAPTURE(path.name);
                    CAPTURE(scale);
                    CAPTURE(bias);
                    auto serves = [&](const schedx_variant_info &e) {
                        return has(e, std::string("stage=") + (planes ? "planes_epilogue" : "epilogue")) &&
                               has(e, std::string("x_type=") + x) && has(e, std::string("scale_type=") + scale) &&
                               has(e, "with_bias=true") == bias;
                    };
                    const int found = int(std::count_if(epilogues.begin(), epilogues.end(), serves));
                    CHECK(found == 1);
                }
            }
        }
    }
    CHECK(paths >= 4);
}
