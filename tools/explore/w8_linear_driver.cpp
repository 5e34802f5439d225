// w8_linear in schedx-explore: y = (x @ W^T) * scales with x bf16 [M, K], W int8 [N, K],
// scales bf16 [N], checked against an fp64 reference on sampled rows (a full host
// reference at M = 4096, N = K = 8192 would take minutes).
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

class W8Linear : public Instance {
public:
    W8Linear(Backend &b, int64_t m, int64_t n, int64_t k)
        : b_(b), m_(m), n_(n), k_(k), sets_(rotation_sets(b, bytes_moved())), x_(b, size_t(m * k) * 2, sets_),
          w_(b, size_t(n * k), sets_), scales_(b, size_t(n) * 2, sets_), y_(b, size_t(m * n) * 2, sets_) {
        std::vector<uint16_t> x(size_t(m * k)), scales(n);
        std::vector<int8_t> w(size_t(n * k));
        for (int s = sets_ - 1; s >= 0; s--) {
            // Activations in [-4, 4], weights over the whole int8 range, scales near 1/127:
            // outputs of order sqrt(K), never all zero.
            for (size_t i = 0; i < x.size(); i++) {
                x[i] = ref::float_to_bf16(float(int(test::mix(uint32_t(s * 0x9E3779B1u) ^ uint32_t(i)) % 20001) - 10000) / 2500.0f);
            }
            for (size_t i = 0; i < w.size(); i++) w[i] = int8_t(test::mix(uint32_t(s * 0x85EBCA6Bu) ^ uint32_t(i) ^ 0x5bd1e995u));
            for (int64_t j = 0; j < n; j++) {
                scales[j] = ref::float_to_bf16((0.5f + float(test::mix(uint32_t(j) + s) % 1000) / 1000.0f) / 127.0f);
            }
            b.upload(x_.at(s), x.data(), x.size() * 2);
            b.upload(w_.at(s), w.data(), w.size());
            b.upload(scales_.at(s), scales.data(), scales.size() * 2);
        }
        x0_ = std::move(x);  // set 0, the one checked
        w0_ = std::move(w);
        scales0_ = std::move(scales);
        b.fill(y_.at(0), 0, y_.slot_bytes() * sets_);  // touch every output page before timing
    }

    int sets() const override { return sets_; }
    uint64_t bytes_moved() const override { return uint64_t(2 * m_ * k_ + n_ * k_ + 2 * n_ + 2 * m_ * n_); }

    schedx_status run(int set) override {
        return schedx_w8_linear(x_.at(set), m_, k_, k_, SCHEDX_BF16, reinterpret_cast<const int8_t *>(w_.at(set)), n_, k_,
                                scales_.at(set), SCHEDX_BF16, nullptr, y_.at(set), n_, b_.device(), nullptr);
    }

    std::string check() override {
        b_.fill(y_.at(0), 0xFF, size_t(m_ * n_) * 2);  // bf16 NaN: an unwritten output fails the bound
        if (schedx_status s = run(0)) return "status " + std::to_string(s) + ": " + schedx_last_error();
        std::vector<uint16_t> y(size_t(m_ * n_));
        b_.download(y.data(), y_.at(0), y.size() * 2);
        if (expected_.empty()) reference();
        for (size_t r = 0; r < rows_.size(); r++) {
            for (int64_t j = 0; j < n_; j++) {
                const double got = ref::bf16_to_float(y[size_t(rows_[r] * n_ + j)]);
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
                    const double t = double(ref::bf16_to_float(x0_[size_t(i * k_ + kk)])) * w0_[size_t(j * k_ + kk)];
                    sum += t;
                    sum_abs += std::fabs(t);
                }
                const double s = ref::bf16_to_float(scales0_[j]);
                expected_.push_back(sum * s);
                sum_abs_.push_back(sum_abs * s);
            }
        }
    }

    Backend &b_;
    int64_t m_, n_, k_;
    int sets_;
    Pool x_, w_, scales_, y_;
    std::vector<uint16_t> x0_, scales0_;
    std::vector<int8_t> w0_;
    std::vector<int64_t> rows_;               // the rows checked
    std::vector<double> expected_, sum_abs_;  // per checked row and column
};

}  // namespace

const OpDriver &w8_linear_driver() {
    static const OpDriver d{
        "w8_linear",
        "MxNxK",
        {"bf16"},
        {{1, 256, 256}, {1, 1024, 1000}, {4, 512, 512}, {16, 512, 512}, {64, 512, 512}},
        // ../shared/ANCHORS.md: N = K = 8192 over the batch sizes it measures.
        {{1, 8192, 8192}, {2, 8192, 8192}, {4, 8192, 8192}, {8, 8192, 8192}, {16, 8192, 8192}, {128, 8192, 8192},
         {1024, 8192, 8192}, {4096, 8192, 8192}},
        {{1, 4096, 4096}, {1, 4097, 4096}, {1, 4096, 4100}, {1, 4096, 4544}, {1, 4096, 5000}, {1, 4096, 11008},
         {1, 4096, 11009}, {4, 4096, 4096}, {4, 4097, 4096}, {4, 4096, 4100}, {4, 4096, 4544}, {4, 4096, 11009},
         {16, 4096, 4096}, {16, 4097, 4096}, {16, 4096, 4100}, {16, 4096, 4544}, {16, 4096, 11009}},
        [](Backend &b, const std::string &, const std::vector<int64_t> &shape) -> std::unique_ptr<Instance> {
            return std::make_unique<W8Linear>(b, shape[0], shape[1], shape[2]);
        }};
    return d;
}

}  // namespace explore
