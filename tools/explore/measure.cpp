#include "measure.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace explore {
namespace {

// Launches per timed sample are chosen so a sample lasts about this long: long enough
// for the clock and launch gaps not to matter, short enough to explore many shapes.
constexpr double kSampleUs = 2000;
// With a dirty cache, calls per sample: each one follows a write of several times the cache.
constexpr int kDirtyCallsPerSample = 50;

}  // namespace

Measurement measure(Backend &b, const std::function<void(int)> &launch, int sets, const Timing &timing) {
    int next = 0;
    auto sample = [&](int n) {
        const int first = next;
        next = int((int64_t(next) + n) % sets);
        auto rotated = [&](int i) { launch(int((int64_t(first) + i) % sets)); };
        return (timing.dirty_cache ? b.elapsed_us_dirty(rotated, n) : b.elapsed_us(rotated, n)) / n;
    };
    sample(1);  // warm-up: the first call loads the CUDA module or starts the CPU thread pool
    const int most = timing.dirty_cache ? kDirtyCallsPerSample : 100000;
    const int n = std::clamp(int(kSampleUs / std::max(sample(3), 0.05)), 1, most);
    sample(n);
    std::vector<double> t;
    for (int r = 0; r < timing.repeats; r++) t.push_back(sample(n));
    std::sort(t.begin(), t.end());
    auto at = [&](double q) { return t[size_t(q * (t.size() - 1) + 0.5)]; };
    return {at(0.5), at(0.1), at(0.9), timing.repeats};
}

}  // namespace explore
