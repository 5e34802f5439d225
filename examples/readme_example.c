#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "schedx/schedx.h"

int main(void) { /* fp8 cast + transpose of a 64 x 128 bf16 matrix on the CPU */
    enum { M = 64, K = 128 };
    static uint16_t x[M][K];               /* bf16 bits */
    static uint8_t rows[M][K], cols[K][M]; /* e4m3fn, row- and column-major */
    float scale = 2.0f, amax, scale_inv;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < K; j++) {
            float v = (float)(i - j) / 8; /* exact in bf16, whose bits are a float's top half */
            uint32_t bits;
            memcpy(&bits, &v, sizeof bits);
            x[i][j] = (uint16_t)(bits >> 16);
        }
    if (schedx_cast_transpose_fp8(x, M, K, K, SCHEDX_BF16, &scale, SCHEDX_E4M3FN, &rows[0][0], K, &cols[0][0], M,
                                  &amax, &scale_inv, SCHEDX_DEVICE_CPU, NULL) != SCHEDX_OK) {
        fprintf(stderr, "schedx: %s\n", schedx_last_error());
        return 1;
    }
    /* x[0][8] * scale = -2: e4m3fn 0xC0 in both copies; amax = max |x| = 127 / 8 */
    int ok = rows[0][8] == 0xC0 && cols[8][0] == 0xC0 && amax == 15.875f && scale_inv == 0.5f;
    printf("%s: %s\n", schedx_last_variant("cast_transpose"), ok ? "as expected" : "WRONG");
    return !ok;
}
