// w4_linear in schedx-explore: y = x @ dequant(W)^T, W 4-bit in groups of 128 along K, per
// configuration x bf16 with bf16 scales, symmetric ("bf16") or with zero points ("bf16+zeros"),
// or x fp16 with fp16 scales and zero points ("fp16+zeros"). Checked against an fp64 reference
// on sampled rows. The ceiling is a read-only kernel over the bytes a call reads: each set's W,
// scales, zero points and x lie in one slot (with room for y's bytes), which the anchor reads.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "driver.h"
#include "reference.h"
#include "test_util.h"
#include "w8_linear_case.h"  // round_to_half: nearest-even fp16 and bf16 bits

namespace explore {
namespace {

constexpr int kCheckedRows = 8;
constexpr int64_t kGroup = 128;

class W4Linear : public Instance {
public:
    W4Linear(Backend &b, bool fp16, bool zeros, int64_t m, int64_t n, int64_t k)
        : b_(b), fp16_(fp16), zeros_(zeros), m_(m), n_(n), k_(k), groups_(k / kGroup),
          sets_(rotation_sets(b, bytes_moved())), in_(b, size_t(bytes_moved()), sets_), y_(b, size_t(m * n) * 2, sets_) {
        if (k % kGroup != 0) throw std::runtime_error("w4_linear: K must be a multiple of 128 here");
        std::vector<uint8_t> slot(in_.slot_bytes());
        for (int s = sets_ - 1; s >= 0; s--) {
            auto *w = reinterpret_cast<uint32_t *>(slot.data() + w_offset());
            auto *sc = reinterpret_cast<uint16_t *>(slot.data() + scales_offset());
            auto *z = reinterpret_cast<uint16_t *>(slot.data() + zeros_offset());
            auto *x = reinterpret_cast<uint16_t *>(slot.data() + x_offset());
            for (int64_t i = 0; i < n_ * k_ / 8; i++) w[i] = test::mix(uint32_t(s * 0x85EBCA6Bu) ^ uint32_t(i));
            for (int64_t i = 0; i < n_ * groups_; i++) {
                const uint32_t r = test::mix(uint32_t(i) ^ uint32_t(s * 977));
                const float v = (0.5f + float(r % 1000) / 1000.0f) / 64.0f;  // outputs of order sqrt(K)
                sc[i] = test::round_to_half(v, fp16 ? SCHEDX_FP16 : SCHEDX_BF16);
                const float zv = float(r % 17);
                if (zeros) z[i] = test::round_to_half(zv, fp16 ? SCHEDX_FP16 : SCHEDX_BF16);
            }
            for (int64_t i = 0; i < m_ * k_; i++) {
                const float v = float(int(test::mix(uint32_t(s * 0x9E3779B1u) ^ uint32_t(i)) % 2001) - 1000) / 256.0f;
                x[i] = test::round_to_half(v, fp16 ? SCHEDX_FP16 : SCHEDX_BF16);
            }
            b.upload(in_.at(s), slot.data(), slot.size());
            if (s == 0) slot0_ = slot;
        }
        b.fill(y_.at(0), 0, y_.slot_bytes() * sets_);  // touch every output page before timing
    }

    int sets() const override { return sets_; }
    uint64_t bytes_moved() const override { return uint64_t(y_offset() + 2 * m_ * n_); }
    const void *read_only_input(int set) const override { return in_.at(set); }

    schedx_status run(int set) override {
        const uint8_t *base = in_.at(set);
        const schedx_dtype t = fp16_ ? SCHEDX_FP16 : SCHEDX_BF16;
        return schedx_w4_linear(base + x_offset(), m_, k_, k_, t, reinterpret_cast<const uint32_t *>(base + w_offset()),
                                n_, k_ / 8, kGroup, base + scales_offset(), zeros_ ? base + zeros_offset() : nullptr, t,
                                nullptr, y_.at(set), n_, b_.device(), nullptr);
    }

    std::string check() override {
        b_.fill(y_.at(0), 0xFF, size_t(m_ * n_) * 2);  // NaN: an unwritten output fails the bound
        if (schedx_status s = run(0)) return "status " + std::to_string(s) + ": " + schedx_last_error();
        std::vector<uint16_t> y(size_t(m_ * n_));
        b_.download(y.data(), y_.at(0), y.size() * 2);
        auto value = [&](uint16_t bits) { return double(fp16_ ? ref::fp16_to_float(bits) : ref::bf16_to_float(bits)); };
        const auto *w = reinterpret_cast<const uint32_t *>(slot0_.data() + w_offset());
        const auto *sc = reinterpret_cast<const uint16_t *>(slot0_.data() + scales_offset());
        const auto *z = reinterpret_cast<const uint16_t *>(slot0_.data() + zeros_offset());
        const auto *x = reinterpret_cast<const uint16_t *>(slot0_.data() + x_offset());
        // The dequantize + cuBLAS path rounds each weight once to x's dtype: its reference does too.
        const char *last = schedx_last_variant("w4_linear");
        const bool weight_rounded = last && std::strstr(last, "_dequant_");
        const schedx_dtype t = fp16_ ? SCHEDX_FP16 : SCHEDX_BF16;
        for (int r = 0; r < std::min<int64_t>(m_, kCheckedRows); r++) {
            const int64_t i = m_ <= kCheckedRows ? r : r * (m_ - 1) / (kCheckedRows - 1);
            for (int64_t j = 0; j < n_; j++) {
                double sum = 0, sum_abs = 0;
                for (int64_t kk = 0; kk < k_; kk++) {
                    const int64_t gi = j * groups_ + kk / kGroup;
                    const double u = double((w[j * k_ / 8 + kk / 8] >> (4 * (kk % 8))) & 0xF);
                    double wv = (u - (zeros_ ? value(z[gi]) : 8.0)) * value(sc[gi]);
                    if (weight_rounded) wv = value(test::round_to_half(wv, t));
                    const double term = value(x[i * k_ + kk]) * wv;
                    sum += term;
                    sum_abs += std::fabs(term);
                }
                const double got = value(y[size_t(i * n_ + j)]);
                // Output rounding is relative to |sum|; fp32 sums in any order to the sum of |terms|.
                if (!(std::fabs(got - sum) <= 1e-2 * std::fabs(sum) + 1e-4 * sum_abs)) {
                    char msg[160];
                    std::snprintf(msg, sizeof(msg), "at (%lld, %lld): got %.6g, fp64 reference %.6g", (long long)i,
                                  (long long)j, got, sum);
                    return msg;
                }
            }
        }
        return "";
    }

private:
    // One slot: W, scales, zero points, x, then room for y (read by the anchor alone).
    int64_t w_offset() const { return 0; }
    int64_t scales_offset() const { return (n_ * k_ / 2 + 255) / 256 * 256; }
    int64_t zeros_offset() const { return scales_offset() + (2 * n_ * groups_ + 255) / 256 * 256; }
    int64_t x_offset() const { return zeros_offset() + (zeros_ ? (2 * n_ * groups_ + 255) / 256 * 256 : 0); }
    int64_t y_offset() const { return x_offset() + (2 * m_ * k_ + 255) / 256 * 256; }

    Backend &b_;
    bool fp16_, zeros_;
    int64_t m_, n_, k_, groups_;
    int sets_;
    Pool in_, y_;
    std::vector<uint8_t> slot0_;  // set 0's inputs, the ones checked
};

}  // namespace

const OpDriver &w4_linear_driver() {
    static const OpDriver d{
        "w4_linear",
        "MxNxK",
        {"bf16", "bf16+zeros", "fp16+zeros"},
        {{1, 256, 256}, {1, 1024, 1024}, {4, 512, 512}, {16, 512, 512}},
        // Issue 50: N = K = 8192 and Llama-3-8B's projections (qkv 6144 x 4096, o 4096 x 4096,
        // gate+up 28672 x 4096, down 4096 x 14336) at M = 1, then small batches.
        {{1, 8192, 8192}, {1, 6144, 4096}, {1, 4096, 4096}, {1, 28672, 4096}, {1, 4096, 14336}, {2, 8192, 8192},
         {4, 8192, 8192}, {16, 8192, 8192}},
        {{1, 4096, 4096}, {1, 4104, 4096}, {1, 4096, 4224}, {4, 4104, 4224}},
        [](Backend &b, const std::string &config, const std::vector<int64_t> &shape) -> std::unique_ptr<Instance> {
            return std::make_unique<W4Linear>(b, config == "fp16+zeros", config != "bf16", shape[0], shape[1], shape[2]);
        },
        true};
    return d;
}

}  // namespace explore
