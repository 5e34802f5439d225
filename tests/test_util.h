// Buffers with guard bytes and poison, so out-of-bounds writes and unwritten elements show.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "schedx/schedx.h"

namespace test {

constexpr uint8_t kPoison = 0xA5;  // not a value the tests' inputs can produce in every slot
constexpr size_t kGuard = 256;

// `bytes` usable bytes, 64-byte aligned, surrounded by guard bytes.
class Guarded {
public:
    explicit Guarded(size_t bytes, uint8_t fill = kPoison) : bytes_(bytes), mem_(bytes + 2 * kGuard + 64) {
        std::memset(mem_.data(), kGuardByte, mem_.size());
        offset_ = kGuard + (64 - reinterpret_cast<uintptr_t>(mem_.data() + kGuard) % 64) % 64;
        std::memset(data(), fill, bytes_);
    }
    uint8_t *data() { return mem_.data() + offset_; }
    template <typename T> T *as() { return reinterpret_cast<T *>(data()); }
    size_t size() const { return bytes_; }
    // Every byte still the fill the buffer was made with (kPoison unless given).
    bool untouched(uint8_t fill = kPoison) const {
        for (size_t i = 0; i < bytes_; i++) {
            if (mem_[offset_ + i] != fill) return false;
        }
        return guards_intact();
    }
    bool guards_intact() const {
        for (size_t i = 0; i < mem_.size(); i++) {
            if ((i < offset_ || i >= offset_ + bytes_) && mem_[i] != kGuardByte) return false;
        }
        return true;
    }

private:
    static constexpr uint8_t kGuardByte = 0x5A;
    size_t bytes_, offset_ = 0;
    std::vector<uint8_t> mem_;
};

// A cheap integer hash, for inputs that are a pure function of their coordinates.
inline uint32_t mix(uint32_t h) {
    h ^= h >> 16;
    h *= 0x7feb352dU;
    h ^= h >> 15;
    h *= 0x846ca68bU;
    h ^= h >> 16;
    return h;
}

// Every test binary's main() calls this first: dispatch must not depend on the user's
// tuning database, so it names a path that can never exist (/dev/null is no directory, so
// not even an append creates it). Tests that want a database set their own.
inline void ignore_user_tuning_db() { setenv("SCHEDX_TUNING_DB", "/dev/null/schedx-tests-no-tuning-db.jsonl", 1); }

// The registry rows of `op` on `device` ("cpu" or "cuda"), in variants.json order. Every
// index below schedx_variant_count() must be readable: a failure aborts the test binary.
inline std::vector<schedx_variant_info> all_variant_infos(const std::string &op, const std::string &device) {
    std::vector<schedx_variant_info> out;
    for (int i = 0; i < schedx_variant_count(); i++) {
        schedx_variant_info info{};
        if (schedx_get_variant(i, &info) != SCHEDX_OK) {
            std::fprintf(stderr, "schedx_get_variant(%d) failed: %s\n", i, schedx_last_error());
            std::abort();
        }
        if (op == info.op && device == info.device) out.push_back(info);
    }
    return out;
}

// all_variant_infos, narrowed by SCHEDX_TEST_VARIANTS (an ECMAScript regex searched in each
// name) to the variants a GPU run forces, so that one device call can test a few new ones; the
// counts tests expect then do not apply (full_variant_list() is false). The variants a forced
// one runs with (an axiswise first pass's second passes) come from all_variant_infos.
inline const char *variant_filter() { return std::getenv("SCHEDX_TEST_VARIANTS"); }
inline bool full_variant_list() { return variant_filter() == nullptr; }

inline std::vector<schedx_variant_info> variant_infos(const std::string &op, const std::string &device) {
    std::vector<schedx_variant_info> out = all_variant_infos(op, device);
    if (const char *filter = variant_filter()) {
        const std::regex wanted(filter);
        out.erase(std::remove_if(out.begin(), out.end(),
                                 [&](const schedx_variant_info &info) { return !std::regex_search(info.name, wanted); }),
                  out.end());
    }
    return out;
}

// A variant's params ("key=value key=value") as a map.
inline std::map<std::string, std::string> params_of(const schedx_variant_info &info) {
    std::map<std::string, std::string> out;
    std::istringstream words(info.params);
    std::string kv;
    while (words >> kv) out[kv.substr(0, kv.find('='))] = kv.substr(kv.find('=') + 1);
    return out;
}

inline std::vector<std::string> variants_of(const std::string &op, const std::string &device) {
    std::vector<std::string> out;
    for (const schedx_variant_info &info : variant_infos(op, device)) out.push_back(info.name);
    return out;
}

}  // namespace test
