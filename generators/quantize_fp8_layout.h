// The rules of quantize_fp8's kernels that its runtime checks calls against, stated once: the
// generator builds by them, runtime/quantize_fp8.cpp reads them. Plain C++, no Halide.
#pragma once

namespace schedx::quantize_layout {

// cuda_tiled: one 128 x 128 tile of x per GPU block, whole tiles only; block2d takes M and K
// in whole 4 x 4 tiles (512), so that its scale arrays have no padding.
constexpr int kTile = 128;
constexpr int whole_tiles(bool block2d) { return block2d ? 4 * kTile : kTile; }
// vector_io: x read 4 elements (8 bytes, 16-bit inputs) at a time, codes stored 4 to a word.
constexpr int kVectorElems = 4;
// axis_pass first: rows of x per column-partial maximum, where a variant does not say.
constexpr int kStripRows = 32;

}  // namespace schedx::quantize_layout
