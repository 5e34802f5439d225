// The rules of cast_transpose's kernels that its runtime checks calls against, stated once: the
// generator builds by them, runtime/cast_transpose.cpp reads them. Plain C++, no Halide.
#pragma once

namespace schedx::cast_layout {

// cuda_tiled: a tile's width along K in elements, where a variant does not say (its height
// along M is the width unless tile_rows says).
constexpr int kTile = 64;
// cuda_tiled io=word: x, rows and cols (but cols_io=element's bytes) in 16-byte vectors, so
// pointers and row pitches are 16-byte aligned.
constexpr int kWordVectorBytes = 16;

}  // namespace schedx::cast_layout
