// How schedx-explore times a call: samples of launches rotating through buffer sets, back
// to back or each after dirtying the cache, median and spread of the samples. Also used by
// bench/read_bandwidth.cu, so that its anchor is timed exactly as the variants are.
#pragma once

#include <functional>

#include "backend.h"

namespace explore {

struct Measurement {
    double median_us = 0, p10_us = 0, p90_us = 0;
    int repeats = 0;
};

// Samples per measurement and whether each call meets a dirty cache.
struct Timing {
    int repeats;
    bool dirty_cache;
};

// Median and 10th/90th percentiles of `timing.repeats` samples, each the mean time of
// launch(set) over enough calls, sets rotating through 0 .. sets - 1, to last about 2 ms
// back to back; or, with a dirty cache, of up to 50 calls each timed alone.
Measurement measure(Backend &b, const std::function<void(int)> &launch, int sets, const Timing &timing);

}  // namespace explore
