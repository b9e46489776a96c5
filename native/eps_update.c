#include "eps.h"
#include "eps_math_inline.h"
#include "eps_linalg.h"

/* blocks with max |v| below this are sent as zeros with scale 0: 127 / max
 * cannot overflow, and error feedback keeps such values in the residual */
#define EPS_INT8_TINY 1e-30f

static int32_t eps_min32(int32_t a, int32_t b) { return a < b ? a : b; }

float EPS_FN(eps_l2_norm)(const float *restrict x, int32_t length) {
    float t = eps_dot(x, x, length);
    int32_t i;
    if (eps_float_to_bits(t) != 0x7f800000u) return eps_sqrtf_inline(t);
    /* the squares overflowed: redo the sum on x / max|x| */
    float amax = 0.0f;
    for (i = 0; i < length; i++) {
        float a = x[i] < 0.0f ? -x[i] : x[i];
        amax = a > amax ? a : amax;
    }
    if (!(amax < 3.4028235e38f) && !(amax > 3.4028235e38f)) return t; /* NaN */
    if (amax > 3.4028235e38f) return amax;                             /* inf */
    float inv = 1.0f / amax;
    double acc = 0.0;
    for (i = 0; i < length; i++) {
        float y = x[i] * inv;
        acc += (double)(y * y);
    }
    return amax * eps_sqrtf_inline((float)acc);
}

void EPS_FN(eps_scale)(float *restrict x, int32_t length, float scale) {
    for (int32_t i = 0; i < length; i++) x[i] *= scale;
}

int32_t EPS_FN(eps_all_finite)(const float *restrict x, int32_t length) {
    uint32_t bad = 0;
    for (int32_t i = 0; i < length; i++) {
        uint32_t u;
        memcpy(&u, x + i, sizeof u);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
    }
    return bad ? 0 : 1;
}

/* Float to IEEE half, round to nearest even, saturating; branch-free so the
 * loops vectorize. Subnormal halves use the FPU's own rounding: adding 0.5
 * to |f| < 2^-14 leaves round(|f| / 2^-24) in the low mantissa bits. */
EPS_INLINE uint16_t eps_float_to_half(float f) {
    uint32_t x = eps_float_to_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    uint32_t normal = (ax - 0x38000000u + 0x0fffu + ((ax >> 13) & 1u)) >> 13;
    uint32_t sub = eps_float_to_bits(eps_bits_to_float(ax) + 0.5f) - 0x3f000000u;
    uint32_t nan = 0x7e00u | ((ax >> 13) & 0x3ffu);
    uint32_t h = ax >= 0x38800000u ? normal : sub;
    h = ax >= 0x477ff000u ? 0x7bffu : h; /* saturate at 65504 */
    h = ax > 0x7f800000u ? nan : h;
    return (uint16_t)(sign | h);
}

EPS_INLINE float eps_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu,
             m = h & 0x3ffu;
    uint32_t normal = (e + 112u) << 23 | m << 13;
    uint32_t special = 0x7f800000u | m << 13;
    uint32_t sub = eps_float_to_bits((float)(int32_t)m * 5.9604644775390625e-08f);
    uint32_t u = e == 0 ? sub : (e == 31 ? special : normal);
    return eps_bits_to_float(u | sign);
}

void EPS_FN(eps_fp16_quantize)(const float *restrict x, float *restrict residual,
                       uint16_t *restrict out, int32_t length) {
    if (!residual) {
        for (int32_t i = 0; i < length; i++) out[i] = eps_float_to_half(x[i]);
        return;
    }
    for (int32_t i = 0; i < length; i++) {
        float v = x[i] + residual[i];
        uint16_t h = eps_float_to_half(v);
        out[i] = h;
        residual[i] = v - eps_half_to_float(h);
    }
}

void EPS_FN(eps_fp16_dequantize)(const uint16_t *restrict q, float *restrict out,
                         int32_t length) {
    for (int32_t i = 0; i < length; i++) out[i] = eps_half_to_float(q[i]);
}

#ifndef EPS_VARIANT_AVX2 /* sizes and checks: built once, in the baseline */
int32_t eps_int8_n_blocks(int32_t length, int32_t block) {
    if (length < 0 || block < 1) return -1;
    return length / block + (length % block != 0);
}

EpsStatus eps_int8_check(int32_t length, int32_t block, int32_t q_length,
                         int32_t scales_length) {
    if (length < 0 || block < 1) return EpsErrValue;
    if (q_length != length || scales_length != eps_int8_n_blocks(length, block))
        return EpsErrLength;
    return EpsOk;
}
#endif

EPS_NO_CONTRACT
EpsStatus EPS_FN(eps_int8_quantize)(const float *restrict x, float *restrict residual,
                            int8_t *restrict q, float *restrict scales,
                            int32_t length, int32_t block) {
    EPS_NO_CONTRACT_BODY
    /* pass 1: per-block max |v| (kept in scales) and a NaN/Inf test, so a bad
     * input is refused before q or the residual is touched */
    uint32_t bad = 0;
    for (int32_t b0 = 0, k = 0; b0 < length; b0 += block, k++) {
        int32_t end = b0 + eps_min32(block, length - b0);
        float amax = 0.0f;
        for (int32_t i = b0; i < end; i++) {
            float v = residual ? x[i] + residual[i] : x[i];
            uint32_t u = eps_float_to_bits(v) & 0x7fffffffu;
            bad |= u >= 0x7f800000u;
            float a = eps_bits_to_float(u);
            amax = a > amax ? a : amax;
        }
        scales[k] = amax;
    }
    if (bad) return EpsErrValue;
    for (int32_t b0 = 0, k = 0; b0 < length; b0 += block, k++) {
        int32_t end = b0 + eps_min32(block, length - b0);
        float amax = scales[k] >= EPS_INT8_TINY ? scales[k] : 0.0f;
        float scale = amax / 127.0f, inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        scales[k] = scale;
        for (int32_t i = b0; i < end; i++) {
            float v = residual ? x[i] + residual[i] : x[i];
            float r = v * inv;
            r += r >= 0.0f ? 0.5f : -0.5f;
            int32_t qi = (int32_t)r;
            qi = qi > 127 ? 127 : (qi < -127 ? -127 : qi);
            q[i] = (int8_t)qi;
            if (residual) residual[i] = v - (float)qi * scale;
        }
    }
    return EpsOk;
}

void EPS_FN(eps_int8_dequantize)(const int8_t *restrict q, const float *restrict scales,
                         float *restrict out, int32_t length, int32_t block) {
    for (int32_t b0 = 0, k = 0; b0 < length; b0 += block, k++) {
        int32_t end = b0 + eps_min32(block, length - b0);
        float scale = scales[k];
        for (int32_t i = b0; i < end; i++) out[i] = (float)q[i] * scale;
    }
}
