// quantize_fp8 in schedx-explore: bf16 -> e4m3 with both orientations and their scale
// arrays, per recipe (block1d and block2d with TE's default power-of-two scales, mx with
// RCEIL, axis with torchao's rowwise defaults), checked bit for bit against the tests' reference on every eighth 128-row band
// and the last one (codes and scales of those rows, in both outputs).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "driver.h"
#include "quantize_reference.h"
#include "test_util.h"

namespace explore {
namespace {

// Magnitudes 2^-20 .. 2^11 with either sign, a few orders of magnitude apart per block.
uint16_t input_bits(int set, size_t i) {
    const uint32_t h = test::mix(uint32_t(set) * 0x9E3779B1u ^ uint32_t(i) ^ uint32_t(i >> 32) * 0x85EBCA6Bu);
    const uint32_t exponent = 127 - 20 + h % 32, mantissa = (h >> 8) & 0x7F, sign = (h >> 15) & 1;
    return uint16_t(sign << 15 | exponent << 7 | mantissa);
}

schedx_quantize_fp8_options options_of(const std::string &config) {
    if (config == "mx") return {SCHEDX_RECIPE_MXFP8, SCHEDX_E4M3FN, 0, 0.0f, SCHEDX_MX_RCEIL};
    if (config == "axis") return {SCHEDX_RECIPE_AXISWISE, SCHEDX_E4M3FN, 1, 0.0f, SCHEDX_MX_FLOOR};
    return {config == "block2d" ? SCHEDX_RECIPE_BLOCK_128X128 : SCHEDX_RECIPE_BLOCK_1X128, SCHEDX_E4M3FN, 1, 0.0f,
            SCHEDX_MX_FLOOR};
}

class Quantize : public Instance {
public:
    Quantize(Backend &b, const std::string &config, int64_t m, int64_t k)
        : b_(b), o_(options_of(config)), m_(m), k_(k), n_(size_t(m) * size_t(k)) {
        schedx_quantize_fp8_scale_shape(o_.recipe, m, k, 0, &rs_[0], &rs_[1]);
        schedx_quantize_fp8_scale_shape(o_.recipe, m, k, 1, &cs_[0], &cs_[1]);
        scale_bytes_ = o_.recipe == SCHEDX_RECIPE_MXFP8 ? 1 : 4;
        sets_ = rotation_sets(b, bytes_moved());
        x_ = std::make_unique<Pool>(b, 2 * n_, sets_);
        rows_ = std::make_unique<Pool>(b, n_, sets_);
        cols_ = std::make_unique<Pool>(b, n_, sets_);
        rscale_ = std::make_unique<Pool>(b, rs_bytes(), sets_);
        cscale_ = std::make_unique<Pool>(b, cs_bytes(), sets_);
        std::vector<uint16_t> host(n_);
        for (int s = sets_ - 1; s >= 0; s--) {
            for (size_t i = 0; i < n_; i++) host[i] = input_bits(s, i);
            b.upload(x_->at(s), host.data(), 2 * n_);
        }
        x0_ = std::move(host);
        for (Pool *p : {rows_.get(), cols_.get(), rscale_.get(), cscale_.get()}) {
            b.fill(p->at(0), test::kPoison, p->slot_bytes() * sets_);
        }
    }

    int sets() const override { return sets_; }
    // x read once, both fp8 copies and both scale arrays written.
    uint64_t bytes_moved() const override { return 4 * uint64_t(n_) + rs_bytes() + cs_bytes(); }

    schedx_status run(int set) override {
        return schedx_quantize_fp8(x_->at(set), m_, k_, k_, SCHEDX_BF16, &o_, rows_->at(set), k_, rscale_->at(set),
                                   cols_->at(set), m_, cscale_->at(set), b_.device(), nullptr);
    }

    std::string check() override {
        for (Pool *p : {rows_.get(), cols_.get(), rscale_.get(), cscale_.get()}) {
            b_.fill(p->at(0), test::kPoison, p->slot_bytes());
        }
        if (schedx_status s = run(0)) return "status " + std::to_string(s) + ": " + schedx_last_error();
        std::vector<uint8_t> rows(n_), cols(n_), rs(rs_bytes()), cs(cs_bytes());
        b_.download(rows.data(), rows_->at(0), n_);
        b_.download(cols.data(), cols_->at(0), n_);
        b_.download(rs.data(), rscale_->at(0), rs.size());
        b_.download(cs.data(), cscale_->at(0), cs.size());
        const bool mx = o_.recipe == SCHEDX_RECIPE_MXFP8, square = o_.recipe == SCHEDX_RECIPE_BLOCK_128X128;
        const int B = mx ? 32 : 128;
        const ref::Fp8Table &t = ref::e4m3fn();
        auto v = [&](int64_t i, int64_t j) { return ref::bf16_to_float(x0_[size_t(i) * k_ + j]); };
        auto amax = [&](int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
            float a = 0;
            for (int64_t i = i0; i < std::min(i1, m_); i++) {
                for (int64_t j = j0; j < std::min(j1, k_); j++) a = std::max(a, std::fabs(v(i, j)));
            }
            return a;
        };
        auto code = [&](float x, float a) -> uint8_t {
            if (!mx) return ref::encode(x * test::qref::te_scale(a, o_, SCHEDX_BF16), t);
            return ref::encode(x * std::ldexp(1.0f, 127 - int(test::qref::mx_byte(a, o_))), t);
        };
        auto entry = [&](float a) -> uint32_t {
            return mx ? test::qref::mx_byte(a, o_) : ref::float_to_bits(1.0f / test::qref::te_scale(a, o_, SCHEDX_BF16));
        };
        auto got_entry = [&](const std::vector<uint8_t> &s, int64_t idx) -> uint32_t {
            if (mx) return s[size_t(idx)];
            uint32_t u;
            std::memcpy(&u, s.data() + size_t(idx) * 4, 4);
            return u;
        };
        const int64_t bands = (m_ + 127) / 128, KB = (k_ + B - 1) / B;
        char msg[200];
        if (o_.recipe == SCHEDX_RECIPE_AXISWISE) return check_axiswise(rows, cols, rs, cs, v, bands);
        // One output's blocks: `line` is its row (cols: a column k of x, rows: a row m), its
        // blocks [blk0, blk1) run along the line; the scale entry and codes of each compared.
        auto check_side = [&](bool is_cols, int64_t line0, int64_t line1, int64_t blk0, int64_t blk1) -> std::string {
            const std::vector<uint8_t> &out = is_cols ? cols : rows, &scales = is_cols ? cs : rs;
            const int64_t along = is_cols ? m_ : k_, s1 = is_cols ? cs_[1] : rs_[1];
            const char *name = is_cols ? "cols" : "rows";
            // Rows i0..i1 and columns j0..j1 of x, given as (along, across) the line.
            auto amax_of = [&](int64_t e0, int64_t e1, int64_t l0, int64_t l1) {
                return is_cols ? amax(e0, e1, l0, l1) : amax(l0, l1, e0, e1);
            };
            for (int64_t line = line0; line < line1; line++) {
                for (int64_t b = blk0; b < blk1; b++) {
                    const float a = square ? amax_of(b * B, b * B + B, line / B * B, line / B * B + B)
                                           : amax_of(b * B, b * B + B, line, line + 1);
                    const int64_t at = mx ? line * s1 + b : square ? (line / B) * s1 + b : b * s1 + line;
                    if (got_entry(scales, at) != entry(a)) {
                        std::snprintf(msg, sizeof(msg), "%s scale at (line %lld, block %lld): want 0x%x got 0x%x", name,
                                      (long long)line, (long long)b, entry(a), got_entry(scales, at));
                        return msg;
                    }
                    for (int64_t e = b * B; e < std::min(b * B + B, along); e++) {
                        const uint8_t w = is_cols ? code(v(e, line), a) : code(v(line, e), a);
                        const uint8_t g = out[size_t(line) * along + e];
                        if (g != w) {
                            std::snprintf(msg, sizeof(msg), "%s at (line %lld, %lld): want 0x%02x got 0x%02x", name,
                                          (long long)line, (long long)e, w, g);
                            return msg;
                        }
                    }
                }
            }
            return "";
        };
        for (int64_t band = 0; band < bands; band++) {
            if (band % 8 != 0 && band != bands - 1) continue;
            // The band's column blocks (1x128: one per column; MX: four 32-row ones), then its rows.
            const int64_t mb_end = (std::min((band + 1) * 128, m_) + B - 1) / B;
            std::string failure = check_side(true, 0, k_, band * 128 / B, mb_end);
            if (failure.empty()) failure = check_side(false, band * 128, std::min((band + 1) * 128, m_), 0, KB);
            if (!failure.empty()) return failure;
        }
        return "";
    }

private:
    // Axiswise: every column's scale and each sampled band's rows, codes of both outputs.
    template <typename V>
    std::string check_axiswise(const std::vector<uint8_t> &rows, const std::vector<uint8_t> &cols,
                               const std::vector<uint8_t> &rs, const std::vector<uint8_t> &cs, V v, int64_t bands) {
        auto bits = [](const std::vector<uint8_t> &s, int64_t idx) {
            uint32_t u;
            std::memcpy(&u, s.data() + size_t(idx) * 4, 4);
            return u;
        };
        std::vector<float> col_scale(static_cast<size_t>(k_));
        std::vector<float> col_amax(static_cast<size_t>(k_), 0.0f);
        for (int64_t i = 0; i < m_; i++) {
            for (int64_t j = 0; j < k_; j++) col_amax[size_t(j)] = std::max(col_amax[size_t(j)], std::fabs(v(i, j)));
        }
        char msg[200];
        for (int64_t j = 0; j < k_; j++) {
            col_scale[size_t(j)] = test::qref::axis_scale(col_amax[size_t(j)], o_);
            if (bits(cs, j) != ref::float_to_bits(col_scale[size_t(j)])) {
                std::snprintf(msg, sizeof(msg), "cols scale %lld: want %g got bits 0x%x", (long long)j,
                              col_scale[size_t(j)], bits(cs, j));
                return msg;
            }
        }
        for (int64_t band = 0; band < bands; band++) {
            if (band % 8 != 0 && band != bands - 1) continue;
            for (int64_t i = band * 128; i < std::min((band + 1) * 128, m_); i++) {
                float a = 0;
                for (int64_t j = 0; j < k_; j++) a = std::max(a, std::fabs(v(i, j)));
                const float s = test::qref::axis_scale(a, o_);
                if (bits(rs, i) != ref::float_to_bits(s)) {
                    std::snprintf(msg, sizeof(msg), "rows scale %lld: want %g got bits 0x%x", (long long)i, s, bits(rs, i));
                    return msg;
                }
                for (int64_t j = 0; j < k_; j++) {
                    const uint8_t wr = ref::encode(v(i, j) * s, ref::e4m3fn()), gr = rows[size_t(i) * k_ + j];
                    const uint8_t wc = ref::encode(v(i, j) * col_scale[size_t(j)], ref::e4m3fn()), gc = cols[size_t(j) * m_ + i];
                    if (wr != gr || wc != gc) {
                        std::snprintf(msg, sizeof(msg), "at (%lld, %lld): rows want 0x%02x got 0x%02x, cols want 0x%02x got 0x%02x",
                                      (long long)i, (long long)j, wr, gr, wc, gc);
                        return msg;
                    }
                }
            }
        }
        return "";
    }

    uint64_t rs_bytes() const { return uint64_t(rs_[0] * rs_[1]) * scale_bytes_; }
    uint64_t cs_bytes() const { return uint64_t(cs_[0] * cs_[1]) * scale_bytes_; }

    Backend &b_;
    schedx_quantize_fp8_options o_;
    int64_t m_, k_;
    size_t n_;
    int64_t rs_[2] = {0, 0}, cs_[2] = {0, 0};
    int scale_bytes_ = 4, sets_ = 1;
    std::unique_ptr<Pool> x_, rows_, cols_, rscale_, cscale_;
    std::vector<uint16_t> x0_;
};

}  // namespace

const OpDriver &quantize_fp8_driver() {
    static const OpDriver d{
        "quantize_fp8",
        "MxK",
        {"block1d", "block2d", "mx", "axis"},
        {{128, 128}, {256, 256}, {1000, 1000}, {1024, 1024}},
        {{2048, 2048}, {4096, 4096}, {8192, 8192}, {4096, 14336}, {16384, 4096}},
        // Ragged blocks beside an aligned neighbour (M, K off 128 and 32).
        {{4096, 4096}, {4097, 4096}, {4096, 4001}, {2999, 4001}},
        [](Backend &b, const std::string &config, const std::vector<int64_t> &shape) -> std::unique_ptr<Instance> {
            return std::make_unique<Quantize>(b, config, shape[0], shape[1]);
        }};
    return d;
}

}  // namespace explore
