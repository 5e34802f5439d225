// How a kernel that takes only whole tiles covers an M x K matrix of at least one tile:
// its whole tiles, then the last tile column and row shifted inwards to end at K and M
// (and their corner). The shifted launches overlap the first one; the cast writes the same
// bytes there and a maximum is idempotent, so the overlap changes no result.
#pragma once

#include <cstdint>
#include <vector>

namespace schedx {

struct TileRegion {
    int64_t row0, col0, rows, cols;
};

// m >= tile_m and k >= tile_k. One region when M and K are whole tiles, at most four.
inline std::vector<TileRegion> cover_with_tiles(int64_t m, int64_t k, int64_t tile_m, int64_t tile_k) {
    const int64_t whole_m = m / tile_m * tile_m, whole_k = k / tile_k * tile_k;
    std::vector<TileRegion> out{{0, 0, whole_m, whole_k}};
    if (whole_k < k) out.push_back({0, k - tile_k, whole_m, tile_k});
    if (whole_m < m) out.push_back({m - tile_m, 0, tile_m, whole_k});
    if (whole_m < m && whole_k < k) out.push_back({m - tile_m, k - tile_k, tile_m, tile_k});
    return out;
}

}  // namespace schedx
