// w8_linear in schedx-explore: y = (x @ W^T) * scales (+ bias) with W int8 [N, K] and, per
// configuration, x bf16 with bf16 scales ("bf16"), the same with a bf16 bias ("bf16+bias"),
// x fp16 with fp32 scales ("fp16"), or x bf16 with fp32 scales ("bf16+sfp32", torchao's int8 tensors); checked against an fp64 reference on sampled rows (a
// full host reference at M = 4096, N = K = 8192 would take minutes).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "driver.h"
#include "reference.h"
#include "test_util.h"

namespace explore {
namespace {

constexpr int kCheckedRows = 8;

// fp16 bits of k / 256 for |k| <= 1023 (exact: at most 10 significant bits).
uint16_t eighth_byte_to_fp16(int k) {
    if (k == 0) return 0;
    const uint16_t sign = k < 0 ? 0x8000 : 0;
    const int a = std::abs(k);
    int e = 0;
    while ((a >> (e + 1)) != 0) e++;
    return uint16_t(sign | ((e - 8 + 15) << 10) | ((a << (10 - e)) & 0x3FF));
}

class W8Linear : public Instance {
public:
    W8Linear(Backend &b, bool fp16, bool sfp32, bool bias, int64_t m, int64_t n, int64_t k)
        : b_(b), fp16_(fp16), sfp32_(sfp32), bias_(bias), m_(m), n_(n), k_(k), sets_(rotation_sets(b, bytes_moved())),
          x_(b, size_t(m * k) * 2, sets_), w_(b, size_t(n * k), sets_), scales_(b, size_t(n) * scale_bytes(), sets_),
          bias_pool_(b, bias ? size_t(n) * 2 : 1, sets_), y_(b, size_t(m * n) * 2, sets_) {
        std::vector<uint16_t> x(size_t(m * k)), biases(bias ? n : 0);
        std::vector<float> scales(n);
        std::vector<int8_t> w(size_t(n * k));
        for (int s = sets_ - 1; s >= 0; s--) {
            // Activations in [-4, 4], weights over the whole int8 range, scales near 1/127:
            // outputs of order sqrt(K), never all zero.
            for (size_t i = 0; i < x.size(); i++) {
                const uint32_t r = test::mix(uint32_t(s * 0x9E3779B1u) ^ uint32_t(i));
                x[i] = fp16 ? eighth_byte_to_fp16(int(r % 2047) - 1023)
                            : ref::float_to_bf16(float(int(r % 20001) - 10000) / 2500.0f);
            }
            for (size_t i = 0; i < w.size(); i++) w[i] = int8_t(test::mix(uint32_t(s * 0x85EBCA6Bu) ^ uint32_t(i) ^ 0x5bd1e995u));
            std::vector<uint16_t> scale_bits(n);
            for (int64_t j = 0; j < n; j++) {
                const float v = (0.5f + float(test::mix(uint32_t(j) + s) % 1000) / 1000.0f) / 127.0f;
                scale_bits[j] = ref::float_to_bf16(v);
                scales[j] = sfp32 ? v : ref::bf16_to_float(scale_bits[j]);
                if (bias) biases[j] = ref::float_to_bf16(float(int(test::mix(uint32_t(j) ^ 0xB1A5u) % 2001) - 1000) / 64.0f);
            }
            b.upload(x_.at(s), x.data(), x.size() * 2);
            b.upload(w_.at(s), w.data(), w.size());
            if (sfp32) b.upload(scales_.at(s), scales.data(), size_t(n) * 4);
            else b.upload(scales_.at(s), scale_bits.data(), size_t(n) * 2);
            if (bias) b.upload(bias_pool_.at(s), biases.data(), size_t(n) * 2);
        }
        x0_ = std::move(x);  // set 0, the one checked
        w0_ = std::move(w);
        scales0_ = std::move(scales);
        bias0_ = std::move(biases);
        b.fill(y_.at(0), 0, y_.slot_bytes() * sets_);  // touch every output page before timing
    }

    int sets() const override { return sets_; }
    uint64_t bytes_moved() const override {
        return uint64_t(2 * m_ * k_ + n_ * k_ + scale_bytes() * n_ + (bias_ ? 2 * n_ : 0) + 2 * m_ * n_);
    }

    schedx_status run(int set) override {
        return schedx_w8_linear(x_.at(set), m_, k_, k_, fp16_ ? SCHEDX_FP16 : SCHEDX_BF16,
                                reinterpret_cast<const int8_t *>(w_.at(set)), n_, k_, scales_.at(set),
                                sfp32_ ? SCHEDX_FP32 : SCHEDX_BF16, bias_ ? bias_pool_.at(set) : nullptr, y_.at(set), n_,
                                b_.device(), nullptr);
    }

    std::string check() override {
        b_.fill(y_.at(0), 0xFF, size_t(m_ * n_) * 2);  // NaN in bf16 and fp16: an unwritten output fails the bound
        if (schedx_status s = run(0)) return "status " + std::to_string(s) + ": " + schedx_last_error();
        std::vector<uint16_t> y(size_t(m_ * n_));
        b_.download(y.data(), y_.at(0), y.size() * 2);
        if (expected_.empty()) reference();
        for (size_t r = 0; r < rows_.size(); r++) {
            for (int64_t j = 0; j < n_; j++) {
                const uint16_t bits = y[size_t(rows_[r] * n_ + j)];
                const double got = fp16_ ? ref::fp16_to_float(bits) : ref::bf16_to_float(bits);
                const double want = expected_[r * n_ + j], sum_abs = sum_abs_[r * n_ + j];
                // bf16 output rounding is relative to |want|; fp32 accumulation in any order
                // is bounded relative to the sum of |terms|.
                if (!(std::fabs(got - want) <= 1e-2 * std::fabs(want) + 1e-4 * sum_abs)) {
                    char msg[160];
                    std::snprintf(msg, sizeof(msg), "at (%lld, %lld): got %.6g, fp64 reference %.6g",
                                  (long long)rows_[r], (long long)j, got, want);
                    return msg;
                }
            }
        }
        return "";
    }

private:
    void reference() {
        for (int r = 0; r < std::min<int64_t>(m_, kCheckedRows); r++) {
            rows_.push_back(m_ <= kCheckedRows ? r : r * (m_ - 1) / (kCheckedRows - 1));  // first and last included
        }
        for (int64_t i : rows_) {
            for (int64_t j = 0; j < n_; j++) {
                double sum = 0, sum_abs = 0;
                for (int64_t kk = 0; kk < k_; kk++) {
                    const uint16_t xb = x0_[size_t(i * k_ + kk)];
                    const double t = double(fp16_ ? ref::fp16_to_float(xb) : ref::bf16_to_float(xb)) * w0_[size_t(j * k_ + kk)];
                    sum += t;
                    sum_abs += std::fabs(t);
                }
                const double s = scales0_[j], bias = bias_ ? ref::bf16_to_float(bias0_[j]) : 0.0;
                expected_.push_back(sum * s + bias);
                sum_abs_.push_back(sum_abs * s + std::fabs(bias));
            }
        }
    }

    size_t scale_bytes() const { return sfp32_ ? 4 : 2; }

    Backend &b_;
    bool fp16_, sfp32_, bias_;
    int64_t m_, n_, k_;
    int sets_;
    Pool x_, w_, scales_, bias_pool_, y_;
    std::vector<uint16_t> x0_, bias0_;
    std::vector<float> scales0_;
    std::vector<int8_t> w0_;
    std::vector<int64_t> rows_;               // the rows checked
    std::vector<double> expected_, sum_abs_;  // per checked row and column
};

}  // namespace

const OpDriver &w8_linear_driver() {
    static const OpDriver d{
        "w8_linear",
        "MxNxK",
        {"bf16", "bf16+bias", "fp16", "bf16+sfp32"},
        {{1, 256, 256}, {1, 1024, 1000}, {4, 512, 512}, {16, 512, 512}, {64, 512, 512}},
        // ../shared/ANCHORS.md: N = K = 8192 over the batch sizes it measures.
        {{1, 8192, 8192}, {2, 8192, 8192}, {4, 8192, 8192}, {8, 8192, 8192}, {16, 8192, 8192}, {128, 8192, 8192},
         {1024, 8192, 8192}, {4096, 8192, 8192}},
        {{1, 4096, 4096}, {1, 4097, 4096}, {1, 4096, 4100}, {1, 4096, 4544}, {1, 4096, 5000}, {1, 4096, 11008},
         {1, 4096, 11009}, {4, 4096, 4096}, {4, 4097, 4096}, {4, 4096, 4100}, {4, 4096, 4544}, {4, 4096, 11009},
         {16, 4096, 4096}, {16, 4097, 4096}, {16, 4096, 4100}, {16, 4096, 4544}, {16, 4096, 11009},
         // K off 16 with 64 MiB of W, beside its aligned neighbour (issue 29's 1.15x per weight byte)
         {4, 8192, 8192}, {4, 8192, 8200}, {16, 8192, 8192}, {16, 8192, 8200}},
        [](Backend &b, const std::string &config, const std::vector<int64_t> &shape) -> std::unique_ptr<Instance> {
            const bool fp16 = config == "fp16", sfp32 = fp16 || config == "bf16+sfp32";
            return std::make_unique<W8Linear>(b, fp16, sfp32, config == "bf16+bias", shape[0], shape[1], shape[2]);
        }};
    return d;
}

}  // namespace explore
