/* Helpers for pushing updates: norms, clipping, finiteness, fp16 and
 * block-scaled int8 quantization with optional error feedback. */
#ifndef EPS_UPDATE_H
#define EPS_UPDATE_H
#include <stdint.h>

#include "eps_status.h"
#ifdef __cplusplus
extern "C" {
#endif

/* Euclidean norm; rescales when the squares overflow float32 */
float eps_l2_norm(const float *x, int32_t length);
/* x *= scale */
void eps_scale(float *x, int32_t length, float scale);
/* 1 if no element is NaN or +-Inf, else 0 (bit test: immune to fast-math) */
int32_t eps_all_finite(const float *x, int32_t length);

/* IEEE half bits, round to nearest even, saturating at +-65504, NaN kept.
 * With residual != NULL the value coded is x + residual, and residual
 * becomes what was lost: (x + residual) - dequantized. */
void eps_fp16_quantize(const float *x, float *residual, uint16_t *out,
                       int32_t length);
void eps_fp16_dequantize(const uint16_t *q, float *out, int32_t length);

/* number of blocks (and scales) for `length` values */
int32_t eps_int8_n_blocks(int32_t length, int32_t block);
EpsStatus eps_int8_check(int32_t length, int32_t block, int32_t q_length,
                         int32_t scales_length);
/* Per block: scale = max|v| / 127, q = v / scale rounded half away from
 * zero; a block with max |v| < 1e-30 is all zeros with scale 0. Residual as
 * for fp16. EpsErrValue, with q and residual untouched, on NaN or Inf. */
EpsStatus eps_int8_quantize(const float *x, float *residual, int8_t *q,
                            float *scales, int32_t length, int32_t block);
void eps_int8_dequantize(const int8_t *q, const float *scales, float *out,
                         int32_t length, int32_t block);

#ifdef __cplusplus
}
#endif
#endif
