/* schedx: fused GPU and CPU kernels generated from Halide, dispatched per shape.
 *
 * Conventions shared by every operator:
 * - Raw pointers, sizes and leading dimensions in elements; matrices are row-major
 *   [rows][ld] unless said otherwise. Every pointer is a multiple of its element size
 *   (SCHEDX_ERR_MISALIGNED otherwise: on a GPU a misaligned access loses the context).
 * - device SCHEDX_DEVICE_CPU takes host pointers; SCHEDX_DEVICE_CUDA takes device
 *   pointers (cudaMalloc, PyTorch) and runs in the context that owns them (the primary
 *   context) on `stream` (a cudaStream_t, NULL for the legacy default stream). Calls are
 *   asynchronous on CUDA; nothing is allocated per call.
 * - Calls may be captured into CUDA graphs. Scratch (abs_max; w8_linear's cuBLAS, int8
 *   planes and K = 0 paths; the cast's fused amax and side streams; quantize_fp8's axiswise
 *   passes) is kept per stream, and a graph keeps the scratch of the stream it was captured
 *   on: do not replay it concurrently with other schedx calls on that stream.
 * - Sizes may be 0: an empty operand is valid, as in PyTorch (an MoE expert that received
 *   no tokens). A pointer to an empty matrix may be NULL and is never read or written.
 * - Every call returns a schedx_status; on failure schedx_last_error() (thread-local)
 *   says which argument was wrong and why. Calls are thread-safe.
 */
#ifndef SCHEDX_SCHEDX_H
#define SCHEDX_SCHEDX_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* In C every int is a value of an enum; in C++ an enum without a fixed type holds only
 * its enumerators' bit range, so an out-of-range value from a C caller (which schedx
 * checks and rejects) would be undefined behaviour. C++ sees the enums as int-based: the
 * same ABI, and every value defined. */
#ifdef __cplusplus
#define SCHEDX_ENUM(name) enum name : int
#else
#define SCHEDX_ENUM(name) enum name
#endif

typedef SCHEDX_ENUM(schedx_status) {
    SCHEDX_OK = 0,
    SCHEDX_ERR_NULL_POINTER = 1,       /* a required pointer is NULL */
    SCHEDX_ERR_BAD_SIZE = 2,           /* a size is negative */
    SCHEDX_ERR_BAD_LEADING_DIM = 3,    /* a leading dimension is smaller than its row */
    SCHEDX_ERR_OVERLAP = 4,            /* output buffers overlap each other or an input */
    SCHEDX_ERR_UNSUPPORTED_DTYPE = 5,  /* dtype not supported by this operator */
    SCHEDX_ERR_UNSUPPORTED_FORMAT = 6, /* unknown fp8 format */
    SCHEDX_ERR_BAD_DEVICE = 7,         /* unknown device value */
    SCHEDX_ERR_POINTER_DEVICE = 8,     /* a pointer does not live on the requested device */
    SCHEDX_ERR_SIZE_OVERFLOW = 9,      /* a byte count overflows 64 bits */
    SCHEDX_ERR_UNKNOWN_VARIANT = 10,   /* forced variant name is not in the registry */
    SCHEDX_ERR_VARIANT_CANNOT_RUN = 11,/* forced variant does not accept these arguments */
    SCHEDX_ERR_NO_CUDA = 12,           /* no CUDA driver or device */
    SCHEDX_ERR_KERNEL = 13,            /* the generated pipeline or the CUDA driver failed */
    SCHEDX_ERR_DATABASE = 14,          /* the tuning database could not be read or written */
    SCHEDX_ERR_NO_VARIANT = 15,        /* no variant is built for this combination */
    SCHEDX_ERR_MISALIGNED = 16         /* a pointer is not a multiple of its element size */
} schedx_status;

typedef SCHEDX_ENUM(schedx_device) { SCHEDX_DEVICE_CPU = 0, SCHEDX_DEVICE_CUDA = 1 } schedx_device;

typedef SCHEDX_ENUM(schedx_dtype) {
    SCHEDX_BF16 = 0,
    SCHEDX_FP16 = 1,
    SCHEDX_FP32 = 2,
    SCHEDX_INT8 = 3
} schedx_dtype;

/* fp8 encodings, bit-exact with PyTorch's .to(torch.float8_e4m3fn / float8_e5m2):
 * round-to-nearest-even, subnormals, signed zero. Values beyond the largest finite
 * value (448 / 57344) saturate to it, as CUDA's satfinite conversion and torch.compile
 * do; with the operator's clamp they never occur. NaN encodes as 0x7F: the sign of a
 * NaN is not kept (CUDA's float multiply already canonicalises it that way in PyTorch). */
typedef SCHEDX_ENUM(schedx_fp8_format) { SCHEDX_E4M3FN = 0, SCHEDX_E5M2 = 1 } schedx_fp8_format;

/* Message for the last failed call on this thread ("" if none). */
const char *schedx_last_error(void);

/* The enumerator's name of a status ("SCHEDX_ERR_BAD_SIZE"), or "SCHEDX_UNKNOWN_STATUS". */
const char *schedx_status_name(schedx_status status);

/* The variant registry (schedules/variants.json), in its order. */
typedef struct schedx_variant_info {
    const char *name;   /* e.g. "cast_transpose_bf16_e4m3_t64r4w4" */
    const char *op;     /* e.g. "cast_transpose", "w8_linear", "quantize_fp8" (variants.json's operators) */
    const char *device; /* "cpu" or "cuda" */
    const char *params; /* generator parameters, "key=value ..." */
} schedx_variant_info;
int schedx_variant_count(void);
schedx_status schedx_get_variant(int index, schedx_variant_info *info);

/* Fused fp8 cast + transpose:
 *   rows[m][k] = fp8(clamp(x[m][k] * scale, -FMAX, FMAX))   row-major, leading dim ld_rows
 *   cols[k][m] = the same values                            (f.t().contiguous().t()),
 *                                                            leading dim ld_cols >= M
 *   amax       = max |x| over all elements (NaN if any is NaN)
 *   scale_inv  = 1 / scale
 * x is [M][ldx] of x_dtype (bf16, fp16 or fp32). scale is one float on the same device.
 * rows or cols may be NULL (not computed), not both; amax and scale_inv are both given
 * or both NULL.
 * M = 0 or K = 0 launches no cast: rows and cols are empty (x, rows and cols may be NULL,
 * both at once), amax is 0 and scale_inv 1 / scale (on CUDA written in stream order by one
 * one-thread kernel after a 4-byte memset).
 * The tiled path takes M and K of at least one tile (64 or 128). 16-byte aligned
 * pointers and leading dimensions run word tiles, a ragged M or K as whole tiles plus the
 * last tile row or column shifted inwards (up to four launches, which then need M (with
 * cols) and K (with rows) in 16-byte steps, and K * element size too); other rows (2-byte
 * aligned, dense outputs of a ragged M or K) run element tiles. On CUDA, K of at most 63 or
 * M of at most 16 runs one thread per element of the long dimension (both outputs in one
 * kernel); M of 17 to 63 runs the general variant. */
schedx_status schedx_cast_transpose_fp8(const void *x, int64_t m, int64_t k, int64_t ldx, schedx_dtype x_dtype,
                                        const float *scale, schedx_fp8_format format, uint8_t *rows,
                                        int64_t ld_rows, uint8_t *cols, int64_t ld_cols, float *amax,
                                        float *scale_inv, schedx_device device, void *stream);

/* The same cast scaled by division, as eager PyTorch's clamp(x / divisor, -FMAX, FMAX).to(fp8):
 *   rows[m][k] = fp8(clamp(x[m][k] / divisor, -FMAX, FMAX))   (cols as above)
 * where x / divisor is IEEE fp32 division, rounded once (x * (1 / divisor) can differ from it
 * in the last bit, and so in the fp8 code). divisor is one float on the device of the call.
 * No amax or scale_inv. Arguments, refusals (which write nothing), the empty x and the
 * shapes each path takes are those of schedx_cast_transpose_fp8, with one word tile (on CUDA
 * sm_89 and later for bf16 and fp16 x) and one element tile for bf16 x to e4m3fn or e5m2 and
 * fp16 and fp32 x to e4m3fn; fp16 and fp32 x to e5m2 run the general kernel. */
schedx_status schedx_cast_transpose_fp8_divide(const void *x, int64_t m, int64_t k, int64_t ldx, schedx_dtype x_dtype,
                                               const float *divisor, schedx_fp8_format format, uint8_t *rows,
                                               int64_t ld_rows, uint8_t *cols, int64_t ld_cols, schedx_device device,
                                               void *stream);

/* The same cast with current (just-in-time) tensorwise scaling, as torchao's Float8Linear
 * computes it, in one call and with no copy to the host:
 *   amax      = max |x| (NaN if any element is NaN; 0 for an empty x)
 *   scale     = fp32(FMAX / max(amax, 1e-12)) computed in fp64 (inf amax: 0, NaN: NaN);
 *               with pow2_scales nonzero, rounded down to a power of two (mantissa masked)
 *   scale_inv = 1 / scale
 * then rows and cols as schedx_cast_transpose_fp8 writes them with that scale. amax, scale
 * and scale_inv are one float each, all required, on the device of the call; on CUDA the
 * abs_max kernel, a one-thread scale kernel and the cast run in stream order. */
schedx_status schedx_cast_transpose_fp8_current_scaling(const void *x, int64_t m, int64_t k, int64_t ldx,
                                                        schedx_dtype x_dtype, schedx_fp8_format format,
                                                        int pow2_scales, uint8_t *rows, int64_t ld_rows, uint8_t *cols,
                                                        int64_t ld_cols, float *amax, float *scale, float *scale_inv,
                                                        schedx_device device, void *stream);

/* Weight-only int8 linear (LLM inference):
 *   y[m][n] = (sum_k x[m][k] * W[n][k]) * scales[n] (+ bias[n])
 * x is [M][ldx] of x_dtype (bf16 or fp16); w is int8 [N][ldw]; scales and bias (NULL for
 * none) are [N] of scales_dtype (bf16 or fp32); y is [M][ldy] of x_dtype. Products are
 * summed in fp32, the scale is applied once per output and y is rounded to nearest-even
 * once; the cuBLAS path without bias rounds twice, after the matmul and after the scale,
 * as PyTorch's F.linear(x, W.to(x.dtype)) * scales does.
 * M = 0 or N = 0 writes nothing. K = 0 makes every sum 0: y[m][n] = 0 * scales[n] (+ bias[n]),
 * rounded once (NaN where a scale is inf or NaN); on CUDA one epilogue kernel after a memset.
 * GEMV and small-batch kernels (any N): M = 1 (GEMV) and M <= 16 (small batch); their word
 * forms take K a multiple of 4 with x's and w's row pitches and pointers in steps of 8 and 4
 * bytes (16 bytes each, and K a multiple of 16, for the widest loads); a K off their 256- to
 * 2048-element steps adds one guarded step (those kernels also take M > 16, one pass over W
 * per 16 rows). On CUDA with cuBLAS present (K a multiple of 16, w and its pitch 16-byte
 * aligned) two tensor-core paths use a workspace cached per device and stream (grown on
 * demand, never freed):
 * - the int8 planes path (M <= 1024, K <= 2^17): each row of x becomes three int8 digit
 *   planes of one integer multiple of a power of two, multiplied by W as stored (int32,
 *   exact). Elements within 14 binades of their row's largest |x| (11 for fp16) enter
 *   exactly, smaller ones rounded to 2^-21 of that binade (below an fp32 accumulator's
 *   own error); a row of x holding inf or NaN gives NaN in all its outputs;
 * - the dequantize path (M >= 2): Halide converts W into the workspace and cuBLAS runs a
 *   bf16/fp16 GEMM.
 * Split-K tensor-core kernels (mma.sync, fp32 sums, sm_80 and later) take N * K >= 2^24 with K
 * in whole steps of 64 x split_k elements (64 for their k_tail forms): M = 3..16 with bf16 x
 * and bf16 scales (with or without bias) or fp16 or bf16 x and fp32 scales without bias, and M = 17..64
 * with bf16 x and scales, no bias; for M = 3..16 with bf16 x and scales, no bias, their 4-
 * and 8-byte-load k_tail forms take K a multiple of 4 (rows of w 4-byte and of x 8-byte
 * aligned).
 * The tuning database picks among them per shape. Without a record (rules from H200
 * measurements): the split-K tensor-core kernels where they run (but not M = 33..64 past
 * N = 12288); M = 7..128 past 2^27 multiply-adds and N a multiple of 16 take the planes
 * path; otherwise the small-batch kernels up to M = 16, then the dequantize path past 2^24
 * multiply-adds.
 * The element-I/O GEMV and small-batch kernels take any K, pitch and alignment; the general
 * variant runs only when forced or tuned to. */
schedx_status schedx_w8_linear(const void *x, int64_t m, int64_t k, int64_t ldx, schedx_dtype x_dtype, const int8_t *w,
                               int64_t n, int64_t ldw, const void *scales, schedx_dtype scales_dtype,
                               const void *bias, void *y, int64_t ldy, schedx_device device, void *stream);

/* Weight-only group-wise int4 linear (LLM inference, GPTQ / AWQ checkpoints after repacking):
 *   y[m][n] = sum_g s[n][g] * sum_{k in group g} x[m][k] * (u[n][k] - z[n][g])   (+ bias[n])
 * x is [M][ldx] of x_dtype (bf16 or fp16); y is [M][ldy] of x_dtype. Groups are group_size
 * (32, 64 or 128) consecutive k; K is a multiple of group_size; group g holds k in
 * [g * group_size, (g + 1) * group_size).
 * w: uint32 words [N][ldw] (ldw >= K / 8 words, a multiple of 4 bytes apart): word j of row n
 *   holds u[n][8j + i] in bits 4i..4i+3 (i = 0..7, little-endian nibbles; an unsigned 4-bit
 *   value u in 0..15).
 * scales: [N][K / group_size] dense, of scales_dtype (bf16 or fp16); zeros: the same shape and
 *   dtype, or NULL for the symmetric form; bias: [N] of scales_dtype, or NULL.
 * Two numeric forms:
 *   symmetric (zeros NULL): z = 8, so the weight is q * s with q = u - 8 in -8..7 (the nibble
 *     holds q in offset binary, as GPTQ's sym=True checkpoints store it);
 *   asymmetric (zeros given): the weight is (u - z) * s, z any value of scales_dtype (integers
 *     0..16 from GPTQ, GPTQ v1's stored zero + 1, and AWQ).
 * Every weight (u - z) * s is exact in fp32 for integer z; products are summed in fp32 (each
 * group as sum x * u - z * sum x, scaled once per group; the tensor-core kernels sum x * (M0 + u)
 * and subtract (M0 + z) * sum x, M0 = 128 for bf16 x and 1024 for fp16 x, so their sums round at
 * M0's magnitude) and y rounds to nearest-even once.
 * M = 0 or N = 0 writes nothing; K = 0 writes y = bias (or 0) rounded to x_dtype. Every
 * pointer is a multiple of its element size; the GEMV kernels (CUDA, M = 1) take x and w
 * 16-byte aligned with rows in 16-byte steps (ldx a multiple of 8, ldw of 4); otherwise the
 * general variant runs. Untuned dispatch (H100 timings): on CUDA the GEMV at M = 1 (2 rows of W
 * per warp up to N = 4096, 4 past it), the small-batch kernel at M = 2, the split-K tensor-core
 * kernels for M = 3..64 (groups of at least their chunk), dequantize + cuBLAS past 64, the
 * general variant where no other runs; on the CPU from M = 4 the 3 x 4 register tile where the
 * CPU has AVX-512, else 2 x 4 (neither for fp16 x with bf16 scales). */
schedx_status schedx_w4_linear(const void *x, int64_t m, int64_t k, int64_t ldx, schedx_dtype x_dtype,
                               const uint32_t *w, int64_t n, int64_t ldw, int64_t group_size, const void *scales,
                               const void *zeros, schedx_dtype scales_dtype, const void *bias, void *y, int64_t ldy,
                               schedx_device device, void *stream);

/* dequantize(W) for w4_linear's weights: out[n][k] = (u[n][k] - z[n][g]) * s[n][g], computed in
 * fp32 (exact for integer z) and rounded once to out_dtype (bf16 or fp16), the weight that
 * torchao's and gpt-fast's dequantize give and that w4_linear's dequantize + GEMM paths multiply
 * by. w, scales, zeros (NULL: symmetric, z = 8), group_size and scales_dtype as for
 * schedx_w4_linear; out is [N][ldo], ldo >= K and even, out 4-byte aligned. N = 0 or K = 0
 * writes nothing. CPU only (SCHEDX_ERR_NO_VARIANT on CUDA, where schedx_w4_linear dequantizes
 * into its own workspace). */
schedx_status schedx_w4_dequantize(const uint32_t *w, int64_t n, int64_t k, int64_t ldw, int64_t group_size,
                                   const void *scales, const void *zeros, schedx_dtype scales_dtype,
                                   schedx_dtype out_dtype, void *out, int64_t ldo, schedx_device device, void *stream);

/* max |x| over x [M][ldx] (bf16, fp16 or fp32) into the one float amax, for current
 * (just-in-time) scaling: NaN if any element is NaN, 0 for an empty x (M or K = 0, no
 * kernel launched). */
schedx_status schedx_abs_max(const void *x, int64_t m, int64_t k, int64_t ldx, schedx_dtype x_dtype, float *amax,
                             schedx_device device, void *stream);
/* fp8 quantization with per-block scales, both GEMM operands from one read of x
 * (docs/quantize_fp8.md): x [M][ldx] (bf16, fp16 or fp32) becomes
 *   rows[m][k]  = fp8(x[m][k] * s_row)    row-major, leading dim ld_rows >= K
 *   cols[k][m]  = fp8(x[m][k] * s_col)    x transposed, leading dim ld_cols >= M
 * with a scale per block; rows or cols may be NULL (not computed), not both, and each
 * comes with its scale array (dense, shapes below, written whole, padding included):
 *   SCHEDX_RECIPE_BLOCK_1X128 (TransformerEngine Float8BlockScaling, activations and
 *     gradients): fp32 scale_inv; rows blocks are 1 x 128 along K: [ceil(K/128)][pad4(M)],
 *     element [kb][m]; cols blocks are 128 consecutive m of a column: [ceil(M/128)][pad4(K)],
 *     element [mb][k].
 *   SCHEDX_RECIPE_BLOCK_128X128 (weights): fp32 scale_inv per 128 x 128 block, cols is
 *     the byte transpose of rows; rows [ceil(M/128)][pad4(ceil(K/128))] element [mb][kb],
 *     cols [ceil(K/128)][pad4(ceil(M/128))] element [kb][mb].
 *   SCHEDX_RECIPE_MXFP8 (OCP MX v1.0): E8M0 scale bytes (255 = NaN) per 1 x 32 block of
 *     rows, [M][ceil(K/32)], and per 32 x 1 block of x for cols, [K][ceil(M/32)].
 *   SCHEDX_RECIPE_AXISWISE (torchao's "rowwise" recipe): fp32 scales themselves (not
 *     inverted), one per row of x for rows, [M][1], one per column of x for cols, [1][K];
 *     scale = fp32(fp8_max / max(fp64(amax), 1e-12)), amax propagating NaN (a NaN scale
 *     makes NaN codes), pow2_scales rounds down to a power of two; epsilon is not used.
 * pad4(n) rounds n up to a multiple of 4; padding entries are written as 0.0f. Blocks
 * at a ragged edge (M or K not a multiple of the block) hold the elements that exist.
 * Block recipes follow TE's kernels: scale = fp8_max / max(amax, epsilon) correctly
 * rounded, amax ignoring NaN; amax 0, inf or NaN gives scale 1; an infinite quotient
 * the input dtype's largest finite value; pow2_scales masks the mantissa off (TE's
 * default for this recipe); scale_inv = 1 / scale correctly rounded. MXFP8 follows
 * torchao's to_mx (FLOOR) and _to_mx_rceil (RCEIL, exact round-up as TE): a block holding
 * NaN gets byte 255 (FLOOR: finite elements 0, others NaN; RCEIL: every element NaN);
 * FLOOR divides by max(2^(byte - 127), 2^-126); RCEIL multiplies by 2^(127 - byte), by 1
 * at byte 0, and an inf amax gives byte 254. Elements round to nearest even and
 * saturate to +-fp8_max; NaN encodes as 0x7F (docs/quantize_fp8.md).
 * Empty x (M or K zero) is valid: outputs of no elements may be NULL and launch nothing;
 * a scale array that still has entries (axiswise: rows_scale when K = 0, cols_scale when
 * M = 0) holds the scale of amax 0, fp32(fp8_max / 1e-12) (its power of two with
 * pow2_scales). */
typedef SCHEDX_ENUM(schedx_fp8_recipe) {
    SCHEDX_RECIPE_BLOCK_1X128 = 0,
    SCHEDX_RECIPE_BLOCK_128X128 = 1,
    SCHEDX_RECIPE_MXFP8 = 2,
    SCHEDX_RECIPE_AXISWISE = 3
} schedx_fp8_recipe;

typedef SCHEDX_ENUM(schedx_mx_scale_mode) { SCHEDX_MX_FLOOR = 0, SCHEDX_MX_RCEIL = 1 } schedx_mx_scale_mode;

typedef struct schedx_quantize_fp8_options {
    schedx_fp8_recipe recipe;
    schedx_fp8_format format;
    int pow2_scales;              /* block recipes: 0 or 1 */
    float epsilon;                /* block recipes: finite, >= 0 (TE's default 0) */
    schedx_mx_scale_mode mx_mode; /* MXFP8 only */
} schedx_quantize_fp8_options;

schedx_status schedx_quantize_fp8(const void *x, int64_t m, int64_t k, int64_t ldx, schedx_dtype x_dtype,
                                  const schedx_quantize_fp8_options *options, uint8_t *rows, int64_t ld_rows,
                                  void *rows_scale, uint8_t *cols, int64_t ld_cols, void *cols_scale,
                                  schedx_device device, void *stream);

/* The shape [*n_rows][*n_cols] of the scale array of rows (columnwise 0) or cols
 * (columnwise 1) that schedx_quantize_fp8 writes for an M x K input. */
schedx_status schedx_quantize_fp8_scale_shape(schedx_fp8_recipe recipe, int64_t m, int64_t k, int columnwise,
                                              int64_t *n_rows, int64_t *n_cols);

/* Forces the variant of `op` ("cast_transpose", "abs_max", "w8_linear", "w4_linear", "quantize_fp8",
 * "quantize_fp8_axis_codes") by registry name for the calls that follow in this process;
 * NULL or "" returns to automatic dispatch. */
schedx_status schedx_force_variant(const char *op, const char *variant);

/* The variant schedx_force_variant set for `op`, or NULL under automatic dispatch (the
 * string is this thread's until its next call of this function). */
const char *schedx_forced_variant(const char *op);

/* Which variant the last call of `op` on this thread ran, and why it was chosen
 * ("forced", "tuned exact shape", "tuned bucket", "heuristic"). NULL if none. */
const char *schedx_last_variant(const char *op);
const char *schedx_last_reason(const char *op);

/* Records that this thread's last call of `op` ran outside schedx's kernels (a caller's own
 * path, such as the torch ops' GEMM on the CPU), so that schedx_last_variant(op) returns `path`
 * and schedx_last_reason(op) `reason` until the op's next call; both strings are copied. */
schedx_status schedx_record_outside_call(const char *op, const char *path, const char *reason);

/* CPU variants run their parallel loops on Halide's thread pool: n threads (n >= 1) for the
 * calls that follow in this process; until set, HL_NUM_THREADS or the number of cores.
 * Returns SCHEDX_ERR_BAD_SIZE for n < 1. */
schedx_status schedx_set_num_threads(int n);

/* Or on the caller's pool: `parallel_for` runs body over [begin, end) in chunks of at least
 * `grain` on its threads and returns 0 (PyTorch's stable-ABI torch_parallel_for has this
 * shape; the torch ops install it, so one pool serves both and its thread count is
 * torch.get_num_threads()). NULL returns to Halide's pool. Either way a call whose operands
 * hold less than 256 KiB runs its loops on the calling thread. */
typedef int32_t (*schedx_parallel_for_fn)(int64_t begin, int64_t end, int64_t grain,
                                          void (*body)(int64_t begin, int64_t end, void *ctx), void *ctx);
void schedx_set_parallel_for(schedx_parallel_for_fn parallel_for);

#undef SCHEDX_ENUM

#ifdef __cplusplus
}
#endif

#endif /* SCHEDX_SCHEDX_H */
