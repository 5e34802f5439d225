// cast_transpose in schedx-explore: bf16 -> e4m3fn with both outputs, without and with
// amax, and scaled by divide (x / 2, schedx_cast_transpose_fp8_divide), checked bit for bit
// against the tests' independent fp8 encoder.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "driver.h"
#include "reference.h"
#include "test_util.h"

namespace explore {
namespace {

constexpr float kScale = 2.0f;

// Finite, never zero: magnitudes 2^-14 .. 2^10 with either sign, so after the scale the
// values cover e4m3's subnormals, normals and saturation.
uint16_t input_bits(int set, size_t i) {
    const uint32_t h = test::mix(uint32_t(set) * 0x9E3779B1u ^ uint32_t(i) ^ uint32_t(i >> 32) * 0x85EBCA6Bu);
    const uint32_t exponent = 127 - 14 + h % 24, mantissa = (h >> 8) & 0x7F, sign = (h >> 15) & 1;
    return uint16_t(sign << 15 | exponent << 7 | mantissa);
}

class CastTranspose : public Instance {
public:
    CastTranspose(Backend &b, bool amax, bool divide, int64_t m, int64_t k)
        : b_(b), amax_(amax), divide_(divide), m_(m), k_(k), n_(size_t(m) * size_t(k)), sets_(rotation_sets(b, bytes_moved())),
          x_(b, 2 * n_, sets_), rows_(b, n_, sets_), cols_(b, n_, sets_), scalars_(b, 8, sets_), scale_(b, 4, 1) {
        std::vector<uint16_t> host(n_);
        for (int s = sets_ - 1; s >= 0; s--) {
            for (size_t i = 0; i < n_; i++) host[i] = input_bits(s, i);
            b.upload(x_.at(s), host.data(), 2 * n_);
        }
        x0_ = std::move(host);  // set 0, the one checked
        b.upload(scale_.at(0), &kScale, 4);
        // Touch every output page now, so first-write faults do not land in the timing.
        b.fill(rows_.at(0), test::kPoison, rows_.slot_bytes() * sets_);
        b.fill(cols_.at(0), test::kPoison, cols_.slot_bytes() * sets_);
        b.fill(scalars_.at(0), test::kPoison, scalars_.slot_bytes() * sets_);
    }

    int sets() const override { return sets_; }
    uint64_t bytes_moved() const override { return 4 * uint64_t(n_); }  // 2 read, 1 + 1 written

    schedx_status run(int set) override {
        if (divide_) {
            return schedx_cast_transpose_fp8_divide(x_.at(set), m_, k_, k_, SCHEDX_BF16,
                                                    reinterpret_cast<const float *>(scale_.at(0)), SCHEDX_E4M3FN,
                                                    rows_.at(set), k_, cols_.at(set), m_, b_.device(), nullptr);
        }
        float *amax = amax_ ? reinterpret_cast<float *>(scalars_.at(set)) : nullptr;
        return schedx_cast_transpose_fp8(x_.at(set), m_, k_, k_, SCHEDX_BF16, reinterpret_cast<const float *>(scale_.at(0)),
                                         SCHEDX_E4M3FN, rows_.at(set), k_, cols_.at(set), m_, amax,
                                         amax ? amax + 1 : nullptr, b_.device(), nullptr);
    }

    std::string check() override {
        b_.fill(rows_.at(0), test::kPoison, n_);
        b_.fill(cols_.at(0), test::kPoison, n_);
        b_.fill(scalars_.at(0), test::kPoison, 8);
        if (schedx_status s = run(0)) return "status " + std::to_string(s) + ": " + schedx_last_error();
        std::vector<uint8_t> rows(n_), cols(n_);
        b_.download(rows.data(), rows_.at(0), n_);
        b_.download(cols.data(), cols_.at(0), n_);
        // The reference per input bit pattern: 65,536 encodes instead of one per element.
        std::vector<uint8_t> want(65536);
        for (uint32_t bits = 0; bits < 65536; bits++) {
            const float x = ref::bf16_to_float(uint16_t(bits));
            want[bits] = ref::encode(divide_ ? x / kScale : x * kScale, ref::e4m3fn());
        }
        float max_abs = 0;
        for (int64_t i = 0; i < m_; i++) {
            for (int64_t j = 0; j < k_; j++) {
                const uint16_t x = x0_[size_t(i) * k_ + j];
                const uint8_t w = want[x], r = rows[size_t(i) * k_ + j], c = cols[size_t(j) * m_ + i];
                max_abs = std::max(max_abs, std::fabs(ref::bf16_to_float(x)));
                if (r != w || c != w) {
                    char msg[160];
                    std::snprintf(msg, sizeof(msg), "at (%lld, %lld) x 0x%04x: want 0x%02x, rows 0x%02x, cols 0x%02x",
                                  (long long)i, (long long)j, x, w, r, c);
                    return msg;
                }
            }
        }
        if (amax_) {
            float got[2];
            b_.download(got, scalars_.at(0), 8);
            if (got[0] != max_abs) return "amax " + std::to_string(got[0]) + ", want " + std::to_string(max_abs);
            if (got[1] != 1.0f / kScale) return "scale_inv " + std::to_string(got[1]);
        }
        return "";
    }

private:
    Backend &b_;
    bool amax_, divide_;
    int64_t m_, k_;
    size_t n_;
    int sets_;
    Pool x_, rows_, cols_, scalars_, scale_;  // scalars_: amax, scale_inv per set
    std::vector<uint16_t> x0_;
};

}  // namespace

const OpDriver &cast_transpose_driver() {
    static const OpDriver d{
        "cast_transpose",
        "MxK",
        {"bf16", "bf16+amax", "bf16/divide"},
        {{128, 128}, {256, 256}, {1000, 1000}, {1024, 1024}, {2048, 2048}},
        // ../shared/ANCHORS.md's four shapes, and others around them (4000^2 is not whole tiles).
        {{2048, 2048}, {4096, 4096}, {4000, 4000}, {8192, 4096}, {8192, 8192}, {4096, 14336}, {14336, 4096}, {16384, 4096}},
        {{3072, 4096}, {2999, 4001}, {4096, 4096}, {4097, 4096}, {8192, 8192}, {8000, 8000}, {1, 8192}, {7, 16384},
         {16384, 7}, {32, 16384}, {48, 8192}, {16384, 32}, {12288, 6144}, {12000, 6000}},
        [](Backend &b, const std::string &config, const std::vector<int64_t> &shape) -> std::unique_ptr<Instance> {
            return std::make_unique<CastTranspose>(b, config == "bf16+amax", config == "bf16/divide", shape[0],
                                                   shape[1]);
        }};
    return d;
}

}  // namespace explore
