// abs_max in schedx-explore: bf16, fp16 and fp32, ranked against a read-only kernel over the
// same bytes; checked against the host's maximum of buffer set 0.
#include <cmath>
#include <cstring>

#include "driver.h"
#include "reference.h"
#include "test_util.h"

namespace explore {
namespace {

class AbsMax : public Instance {
public:
    AbsMax(Backend &b, schedx_dtype type, int64_t m, int64_t k)
        : b_(b), type_(type), m_(m), k_(k), elem_bytes_(type == SCHEDX_FP32 ? 4 : 2), n_(size_t(m) * size_t(k)),
          sets_(rotation_sets(b, bytes_moved())), x_(b, n_ * elem_bytes_, sets_), amax_(b, 4, sets_) {
        std::vector<uint8_t> host(n_ * elem_bytes_);
        for (int s = sets_ - 1; s >= 0; s--) {
            fill(s, host.data());
            b.upload(x_.at(s), host.data(), host.size());
        }
        want_ = host_max(host.data());  // set 0, the one checked
        b.fill(amax_.at(0), test::kPoison, amax_.slot_bytes() * sets_);
    }

    int sets() const override { return sets_; }
    uint64_t bytes_moved() const override { return uint64_t(n_) * elem_bytes_; }  // amax's 4 bytes aside
    const void *read_only_input(int set) const override { return x_.at(set); }

    schedx_status run(int set) override {
        return schedx_abs_max(x_.at(set), m_, k_, k_, type_, reinterpret_cast<float *>(amax_.at(set)), b_.device(), nullptr);
    }

    std::string check() override {
        b_.fill(amax_.at(0), test::kPoison, 4);
        if (schedx_status s = run(0)) return "status " + std::to_string(s) + ": " + schedx_last_error();
        float got;
        b_.download(&got, amax_.at(0), 4);
        if (ref::float_to_bits(got) != ref::float_to_bits(want_)) {
            return "amax " + std::to_string(got) + ", want " + std::to_string(want_);
        }
        return "";
    }

private:
    // Finite values from 2^-14 to below 2^10 in magnitude, both signs, and one 4096 (its sign
    // by set) at a position that depends on the set: each set has a different element to find.
    void fill(int set, uint8_t *out) const {
        const size_t planted = size_t(test::mix(uint32_t(set) * 0x9E3779B1u + 17u)) * 2654435761u % n_;
        for (size_t i = 0; i < n_; i++) {
            const uint32_t h = test::mix(uint32_t(set) * 0x85EBCA6Bu ^ uint32_t(i) ^ uint32_t(i >> 32) * 0xC2B2AE35u);
            const uint32_t sign = h >> 31, e = (h >> 16) % 24;  // exponents -14 .. 9
            uint32_t bits = type_ == SCHEDX_FP32   ? sign << 31 | (113 + e) << 23 | (h & 0x7FFFFF)
                            : type_ == SCHEDX_BF16 ? sign << 15 | (113 + e) << 7 | (h & 0x7F)
                                                   : sign << 15 | (1 + e) << 10 | (h & 0x3FF);
            if (i == planted) {
                const uint32_t s = uint32_t(set % 2);
                bits = type_ == SCHEDX_FP32 ? s << 31 | 0x45800000u : type_ == SCHEDX_BF16 ? s << 15 | 0x4580u : s << 15 | 0x6C00u;
            }
            std::memcpy(out + size_t(elem_bytes_) * i, &bits, size_t(elem_bytes_));  // little-endian: the low bytes
        }
    }
    float host_max(const uint8_t *in) const {
        float best = 0;
        for (size_t i = 0; i < n_; i++) {
            float v;
            if (type_ == SCHEDX_FP32) {
                std::memcpy(&v, in + 4 * i, 4);
            } else {
                uint16_t h;
                std::memcpy(&h, in + 2 * i, 2);
                if (type_ == SCHEDX_BF16) {
                    v = ref::bf16_to_float(h);
                } else {
                    v = ref::fp16_to_float(h);
                }
            }
            best = std::max(best, std::fabs(v));
        }
        return best;
    }

    Backend &b_;
    schedx_dtype type_;
    int64_t m_, k_;
    int elem_bytes_;
    size_t n_;
    int sets_;
    Pool x_, amax_;
    float want_ = 0;
};

}  // namespace

const OpDriver &abs_max_driver() {
    static const OpDriver d{
        "abs_max",
        "MxK",
        {"bf16", "fp16", "fp32"},
        {{128, 128}, {1000, 1000}, {1024, 1024}},
        // The float8 training step's activations and weights (../shared/ANCHORS.md's shapes).
        {{4096, 4096}, {8192, 8192}, {16384, 4096}, {4096, 14336}, {16384, 14336}},
        // Rows off 16 bytes (4001 bf16) take the general variant; the others the word one.
        {{4096, 4096}, {4097, 4096}, {2999, 4001}, {1, 8192}, {12000, 6000}},
        [](Backend &b, const std::string &config, const std::vector<int64_t> &shape) -> std::unique_ptr<Instance> {
            const schedx_dtype t = config == "fp32" ? SCHEDX_FP32 : config == "fp16" ? SCHEDX_FP16 : SCHEDX_BF16;
            return std::make_unique<AbsMax>(b, t, shape[0], shape[1]);
        },
        true};
    return d;
}

}  // namespace explore
