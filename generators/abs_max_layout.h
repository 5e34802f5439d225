// How an abs_max block covers its input, stated once: the generator's defaults, which
// runtime/abs_max.cpp reads to size its per-block maxima. Plain C++, no Halide.
#pragma once

namespace schedx::abs_max_layout {

// A block of threads_x x threads_y threads covers threads_x * load_words units of a row (32-bit
// words for the word variants, elements otherwise) by threads_y * rows_per_thread rows.
struct Block {
    int threads_x = 64, threads_y = 4, rows_per_thread = 8, load_words = 4;
};
// The word variants (schedule cuda) read 16-byte vectors: 16-byte aligned base and rows.
constexpr int kWordVectorBytes = 16;

}  // namespace schedx::abs_max_layout
