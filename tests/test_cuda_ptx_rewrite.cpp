// The PTX rewrite on a GPU: modules load through schedx's cuModuleLoadDataEx wrapper
// (rewritten, or refused with the reason), the hardware-encoder cast variants equal their
// integer twins bit for bit on every bf16 / fp16 pattern, and dispatch keeps variants a
// device cannot run off it. Exits 77 (ctest: skipped) without a CUDA device.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "cuda_interop.h"
#include "cuda_test_support.h"

using test::device_sm;
using test::params_of;
using test::test_stream;

extern "C" void *halide_cuda_get_symbol(void *user_context, const char *name);

namespace {

// SCHEDX_PTX_SAMPLES: the samples' folder where the binary runs away from its source tree.
std::string sample(const char *name) {
    const char *dir = std::getenv("SCHEDX_PTX_SAMPLES");
    std::ifstream file(std::string(dir && *dir ? dir : SCHEDX_PTX_SAMPLES_DIR) + "/" + name, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    REQUIRE_MESSAGE(!text.empty(), "missing sample " << name);
    return text;
}

// The name of a registered variant, or "".
std::string registered(const std::string &name) {
    for (const schedx_variant_info &info : test::variant_infos("cast_transpose", "cuda")) {
        if (name == info.name) return name;
    }
    return {};
}

struct CastOutputs {
    std::vector<uint8_t> rows, cols;
    float amax = -1, scale_inv = -1;
    schedx_status status;
};

// `variant`, forced, on an m x k matrix of `x` (element bits, 2 bytes each) on the GPU.
CastOutputs run_forced(const std::string &variant, const std::vector<uint16_t> &x, int64_t m, int64_t k,
                       schedx_dtype dtype, schedx_fp8_format format, float scale, bool amax) {
    CastOutputs out;
    uint16_t *dx = nullptr;
    uint8_t *drows = nullptr, *dcols = nullptr;
    float *dscale = nullptr, *damax = nullptr, *dscale_inv = nullptr;
    const size_t n = size_t(m * k);
    REQUIRE(cudaMalloc(reinterpret_cast<void **>(&dx), 2 * n) == cudaSuccess);
    REQUIRE(cudaMalloc(reinterpret_cast<void **>(&drows), n) == cudaSuccess);
    REQUIRE(cudaMalloc(reinterpret_cast<void **>(&dcols), n) == cudaSuccess);
    REQUIRE(cudaMalloc(reinterpret_cast<void **>(&dscale), 12) == cudaSuccess);
    damax = dscale + 1;
    dscale_inv = dscale + 2;
    REQUIRE(cudaMemcpy(dx, x.data(), 2 * n, cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(cudaMemcpy(dscale, &scale, 4, cudaMemcpyHostToDevice) == cudaSuccess);
    // Poisoned outputs: a byte the kernel does not write shows.
    REQUIRE(cudaMemset(drows, 0xA5, n) == cudaSuccess);
    REQUIRE(cudaMemset(dcols, 0xA5, n) == cudaSuccess);
    REQUIRE(cudaMemset(damax, 0x7F, 8) == cudaSuccess);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    REQUIRE(schedx_force_variant("cast_transpose", variant.c_str()) == SCHEDX_OK);
    out.status = schedx_cast_transpose_fp8(dx, m, k, k, dtype, dscale, format, drows, k, dcols, m,
                                           amax ? damax : nullptr, amax ? dscale_inv : nullptr, SCHEDX_DEVICE_CUDA,
                                           test_stream);
    REQUIRE(schedx_force_variant("cast_transpose", nullptr) == SCHEDX_OK);
    if (out.status == SCHEDX_OK) {
        REQUIRE(cudaStreamSynchronize(test_stream) == cudaSuccess);
        out.rows.resize(n);
        out.cols.resize(n);
        REQUIRE(cudaMemcpy(out.rows.data(), drows, n, cudaMemcpyDeviceToHost) == cudaSuccess);
        REQUIRE(cudaMemcpy(out.cols.data(), dcols, n, cudaMemcpyDeviceToHost) == cudaSuccess);
        REQUIRE(cudaMemcpy(&out.amax, damax, 4, cudaMemcpyDeviceToHost) == cudaSuccess);
        REQUIRE(cudaMemcpy(&out.scale_inv, dscale_inv, 4, cudaMemcpyDeviceToHost) == cudaSuccess);
    }
    for (void *p : {static_cast<void *>(dx), static_cast<void *>(drows), static_cast<void *>(dcols),
                    static_cast<void *>(dscale)}) {
        cudaFree(p);
    }
    return out;
}

// Index of the first differing byte, or -1.
int64_t first_difference(const std::vector<uint8_t> &a, const std::vector<uint8_t> &b) {
    for (size_t i = 0; i < a.size(); i++) {
        if (a[i] != b[i]) return int64_t(i);
    }
    return a.size() == b.size() ? -1 : int64_t(a.size());
}

}  // namespace

TEST_CASE("module loads: rewritten where the device allows, refused with the reason otherwise") {
    using Load = int (*)(void **, const void *, unsigned, int *, void **);
    REQUIRE(cudaFree(nullptr) == cudaSuccess);  // the primary context, current
    const auto load = reinterpret_cast<Load>(halide_cuda_get_symbol(nullptr, "cuModuleLoadDataEx"));
    REQUIRE(reinterpret_cast<void *>(load) != nullptr);
    const int sm = device_sm();
    CAPTURE(sm);
    SUBCASE("a call the table does not know") {
        void *module = nullptr;
        const std::string ptx = sample("unknown_call.ptx");
        CHECK(load(&module, ptx.c_str(), 0, nullptr, nullptr) == 218);  // CUDA_ERROR_INVALID_PTX
        CHECK(module == nullptr);
        CHECK(schedx::take_ptx_load_error().find("schedx_ptx_not_in_table") != std::string::npos);
    }
    SUBCASE("fp8 pair conversions (sm_89), evict-first loads and mma parts (sm_80)") {
        for (const char *name : {"cvt_pairs.ptx", "evict_first.ptx", "mma_parts.ptx"}) {
            CAPTURE(name);
            void *module = nullptr;
            const std::string ptx = sample(name);
            const int r = load(&module, ptx.c_str(), 0, nullptr, nullptr);
            const bool runs = std::strcmp(name, "cvt_pairs.ptx") == 0 ? sm >= 89 : true;
            if (runs) {
                CHECK(r == 0);
                CHECK(module != nullptr);
            } else {
                CHECK(r == 218);
                CHECK(schedx::take_ptx_load_error().find("sm_89") != std::string::npos);
            }
        }
    }
}

// The hardware conversion against the integer encoder: every 16-bit pattern once (NaN,
// inf, subnormals, both signs), at scales that keep values, round into subnormals, push
// them past the largest fp8 (saturation) and to float overflow.
TEST_CASE("hardware-encoder cast variants equal their integer twins on every 16-bit pattern") {
    const int sm = device_sm();
    const int64_t m = 256, k = 256;
    std::vector<uint16_t> x(size_t(m * k));
    for (size_t i = 0; i < x.size(); i++) x[i] = uint16_t(i);
    int compared = 0;
    for (const schedx_variant_info &info : test::variant_infos("cast_transpose", "cuda")) {
        auto p = params_of(info);
        if (p["encoder"] != "ptx") continue;
        const std::string name = info.name;
        CAPTURE(name);
        const schedx_dtype dtype = p["in_type"] == "fp16" ? SCHEDX_FP16 : SCHEDX_BF16;
        const schedx_fp8_format format = p["fp8"] == "e5m2" ? SCHEDX_E5M2 : SCHEDX_E4M3FN;
        const bool amax = p["with_amax"] == "true";
        // The integer twin: the same tiles, else the same without the fused amax.
        std::string twin = registered(name.substr(0, name.rfind("_cvt")) + (amax ? "_amax" : ""));
        if (twin.empty()) twin = registered(name.substr(0, name.rfind("_cvt")));
        REQUIRE_MESSAGE(!twin.empty(), "no integer twin of " << name);
        CAPTURE(twin);
        for (float scale : {1.0f, 448.0f / 3.7f, 0x1p-12f, 0x1p10f, 0x1p100f}) {
            CAPTURE(scale);
            const CastOutputs hw = run_forced(name, x, m, k, dtype, format, scale, amax);
            if (sm < 89) {
                CHECK(hw.status == SCHEDX_ERR_VARIANT_CANNOT_RUN);
                continue;
            }
            REQUIRE_MESSAGE(hw.status == SCHEDX_OK, schedx_last_error());
            const CastOutputs integer = run_forced(twin, x, m, k, dtype, format, scale, amax);
            REQUIRE_MESSAGE(integer.status == SCHEDX_OK, schedx_last_error());
            const int64_t row_diff = first_difference(hw.rows, integer.rows);
            CHECK_MESSAGE(row_diff < 0, "rows differ at element " << row_diff << " (input bits 0x" << std::hex
                                                                   << (row_diff >= 0 ? x[size_t(row_diff)] : 0) << ")");
            CHECK(first_difference(hw.cols, integer.cols) < 0);
            if (amax && twin.find("_amax") != std::string::npos) {
                CHECK(std::memcmp(&hw.amax, &integer.amax, 4) == 0);
                CHECK(hw.scale_inv == integer.scale_inv);
            }
            compared++;
        }
    }
    CHECK(compared > 0);
}

TEST_CASE("dispatch: the hardware-encoder variants run only where the device has the instructions") {
    const int sm = device_sm();
    const int64_t m = 512, k = 512;
    std::vector<uint16_t> x(size_t(m * k), 0x3F80);  // 1.0 in bf16
    const CastOutputs forced = run_forced("cast_transpose_bf16_e4m3_t64r8w4_cvt", x, m, k, SCHEDX_BF16,
                                          SCHEDX_E4M3FN, 1.0f, false);
    if (sm >= 89) {
        CHECK(forced.status == SCHEDX_OK);
        CHECK(std::string(schedx_last_variant("cast_transpose")) == "cast_transpose_bf16_e4m3_t64r8w4_cvt");
    } else {
        CHECK(forced.status == SCHEDX_ERR_VARIANT_CANNOT_RUN);
        CHECK(std::string(schedx_last_error()).find("on this device") != std::string::npos);
    }
}

// Evict-first loads change where W's lines go in the caches, not a single bit of y: each
// evict_first variant against the same schedule without it, on random x and W.
TEST_CASE("evict-first w8_linear variants equal their twins bit for bit") {
    int compared = 0;
    for (const schedx_variant_info &info : test::variant_infos("w8_linear", "cuda")) {
        auto p = params_of(info);
        if (p["evict_first"] != "true") continue;
        const std::string name = info.name, twin = name.substr(0, name.rfind("_evict"));
        CAPTURE(name);
        const int64_t n = 1024, k = 4096;
        for (int64_t m : {int64_t(1), int64_t(3), int64_t(4)}) {
            CAPTURE(m);
            std::vector<uint16_t> x(static_cast<size_t>(m * k)), scales(static_cast<size_t>(n));
            std::vector<int8_t> w(size_t(n * k));
            for (size_t i = 0; i < x.size(); i++) x[i] = uint16_t(0x3C00 + test::mix(uint32_t(i)) % 0x800) ^ (i % 2 ? 0x8000 : 0);
            for (size_t i = 0; i < w.size(); i++) w[i] = int8_t(test::mix(uint32_t(i + 7)));
            for (size_t i = 0; i < scales.size(); i++) scales[i] = uint16_t(0x3B00 + i % 64);  // bf16 near 2^-9
            std::vector<std::vector<uint16_t>> y;
            for (const std::string &v : {name, twin}) {
                void *dx, *dw, *ds, *dy;
                REQUIRE(cudaMalloc(&dx, 2 * x.size()) == cudaSuccess);
                REQUIRE(cudaMalloc(&dw, w.size()) == cudaSuccess);
                REQUIRE(cudaMalloc(&ds, 2 * scales.size()) == cudaSuccess);
                REQUIRE(cudaMalloc(&dy, size_t(2 * m * n)) == cudaSuccess);
                REQUIRE(cudaMemcpy(dx, x.data(), 2 * x.size(), cudaMemcpyHostToDevice) == cudaSuccess);
                REQUIRE(cudaMemcpy(dw, w.data(), w.size(), cudaMemcpyHostToDevice) == cudaSuccess);
                REQUIRE(cudaMemcpy(ds, scales.data(), 2 * scales.size(), cudaMemcpyHostToDevice) == cudaSuccess);
                REQUIRE(cudaMemset(dy, 0xFF, size_t(2 * m * n)) == cudaSuccess);
                REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
                REQUIRE(schedx_force_variant("w8_linear", v.c_str()) == SCHEDX_OK);
                const schedx_status s = schedx_w8_linear(dx, m, k, k, SCHEDX_BF16, static_cast<int8_t *>(dw), n, k, ds,
                                                         SCHEDX_BF16, nullptr, dy, n, SCHEDX_DEVICE_CUDA, test_stream);
                REQUIRE(schedx_force_variant("w8_linear", nullptr) == SCHEDX_OK);
                if (s == SCHEDX_ERR_VARIANT_CANNOT_RUN) break;  // a small-batch variant past its M
                REQUIRE_MESSAGE(s == SCHEDX_OK, schedx_last_error());
                REQUIRE(cudaStreamSynchronize(test_stream) == cudaSuccess);
                y.emplace_back(size_t(m * n));
                REQUIRE(cudaMemcpy(y.back().data(), dy, 2 * y.back().size(), cudaMemcpyDeviceToHost) == cudaSuccess);
                for (void *ptr : {dx, dw, ds, dy}) cudaFree(ptr);
            }
            if (y.size() < 2) continue;
            CHECK(y[0] == y[1]);
            compared++;
        }
    }
    CHECK(compared > 0);
}

int main(int argc, char **argv) { return test::cuda_test_main(argc, argv); }
