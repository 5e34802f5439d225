// The algorithm of cast_transpose's CUDA word tiles on the CPU: the same generator code with
// default_schedule=true, built as test libraries (tests/CMakeLists.txt), covering a shape as
// the runtime does (whole tiles, then the last tile row and column shifted inwards,
// tile_cover.h) against the reference encoder. What a GPU alone can check is the schedule's
// mapping (threads, shared memory, vector I/O); the word packing, the cols words' byte
// permutes and cols_io=element's byte extraction are checked here.
#include <doctest/doctest.h>

#include "cast_transpose_call.h"
#include "cast_transpose_case.h"
#include "cast_tiles_cols_element.h"
#include "cast_tiles_words.h"
#include "check_library.h"
#include "test_util.h"

namespace {

struct Tiles {
    test::CheckLibrary library;
    bool cols_bytes;  // cols_io=element: any ld_cols and M
};

const Tiles kTiles[] = {
    {SCHEDX_CHECK_LIBRARY(cast_tiles_words), false},
    {SCHEDX_CHECK_LIBRARY(cast_tiles_cols_element), true},
};

// Runs a case through the runtime's region cover and binding, as run_cast does on CUDA.
test::CastTransposeRunner runner_of(const schedx::Variant &v) {
    return [&v](const test::CastTransposeCase &c, test::CastTransposeBuffers &b) {
        const schedx::CastTransposeCall call{b.x->data(), c.m, c.k, c.ldx, 2, b.scale->as<float>(), c.format,
                                             c.rows ? b.rows->data() : nullptr, c.cols ? b.cols->data() : nullptr,
                                             c.ld_rows, c.ld_cols, nullptr, nullptr};
        for (const schedx::TileRegion &r : schedx::cover_with_tiles(c.m, c.k, 64, 64)) {
            schedx::PipelineCall run(v, nullptr);
            schedx::bind_cast(run, call.region(r));
            if (const schedx_status s = run.run()) return s;
        }
        return SCHEDX_OK;
    };
}

}  // namespace

TEST_CASE("cast_transpose word tiles on the CPU: whole and shifted tiles, ragged M with cols by bytes") {
    for (const Tiles &t : kTiles) {
        const schedx::Variant v = test::check_library_variant(t.library, "cast_transpose");
        CAPTURE(t.library.name);
        struct Shape {
            int64_t m, k, ldx, ld_rows, ld_cols;
        };
        // Whole tiles; M and K off the tiles in 16-byte steps (shifted regions, as 12000x6000);
        // with cols by bytes also M off 16 (1040 + 1, 4097-like), odd ld_cols.
        std::vector<Shape> shapes = {{64, 64, 64, 64, 64}, {128, 192, 200, 208, 144}, {80, 272, 0, 0, 0}, {1040, 272, 0, 0, 0}};
        if (t.cols_bytes) shapes.insert(shapes.end(), {{65, 64, 0, 0, 0}, {1041, 128, 136, 144, 1043}, {127, 320, 0, 0, 131}});
        for (const Shape &s : shapes) {
            CAPTURE(s.m);
            CAPTURE(s.k);
            CAPTURE(s.ld_cols);
            for (schedx_fp8_format format : {SCHEDX_E4M3FN, SCHEDX_E5M2}) {
                test::CastTransposeCase c{s.m, s.k, s.ldx, s.ld_rows, s.ld_cols, SCHEDX_BF16, format, 0.75f};
                // Every bf16 pattern, NaN and inf included, spread over the matrix.
                CHECK(test::check_cast_transpose(c, [](int64_t i, int64_t j) { return test::mix(uint32_t(i * 7919 + j)) & 0xFFFFu; },
                                                 runner_of(v)) == "");
            }
        }
    }
}
