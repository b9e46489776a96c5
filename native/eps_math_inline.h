/* Inline, libm-free float helpers the kernels are built from (internal).
 *
 * Microcontroller builds must not pull in libm, and the hot loops want
 * branch-free code the compiler can vectorize. eps_math.h exports the
 * out-of-line versions; tests/native/test_math.py measures their accuracy.
 */
#ifndef EPS_MATH_INLINE_H
#define EPS_MATH_INLINE_H
#include <stdint.h>
#include <string.h>

#include "eps_port.h"

EPS_INLINE float eps_bits_to_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

EPS_INLINE uint32_t eps_float_to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* a if cond else b, through bit masks: GCC turns float ?: into branches
 * (tree PRE) that block vectorization; integer selects vectorize */
EPS_INLINE float eps_select(int cond, float a, float b) {
    uint32_t m = 0u - (uint32_t)(cond != 0);
    return eps_bits_to_float((eps_float_to_bits(a) & m) | (eps_float_to_bits(b) & ~m));
}

/* e^x: x = n ln2 + r with |r| <= ln2/2 (Cody-Waite split of ln2), a degree-7
 * Taylor polynomial for e^r, and 2^n applied as two halves so that results
 * down to the subnormal range and up to overflow come out right. */
EPS_INLINE float eps_expf_inline(float x) {
    float xc = eps_select(x > -104.0f, x, -104.0f); /* NaN too; restored below */
    xc = eps_select(xc < 89.0f, xc, 89.0f);
    float t = xc * 1.44269504088896341f;
    int32_t n = (int32_t)(t + 0.5f) - (t < -0.5f); /* nearest; ties do not matter */
    float nf = (float)n;
    float r = xc - nf * 0.693145751953125f;
    r = r - nf * 1.428606765330187e-06f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t n1 = n / 2;
    int32_t n2 = n - n1;
    float s1 = eps_bits_to_float((uint32_t)(n1 + 127) << 23);
    float s2 = eps_bits_to_float((uint32_t)(n2 + 127) << 23);
    return eps_select(x == x, p * s1 * s2, x);
}

/* ln(x) for x > 0: x = 2^e m with m in [sqrt(1/2), sqrt(2)), then the atanh
 * series ln(m) = 2 atanh((m-1)/(m+1)). Handles zero, negatives, inf, NaN and
 * subnormals; not used in vectorized loops, so branches are fine. */
EPS_INLINE float eps_logf_inline(float x) {
    if (!(x > 0.0f)) /* -inf for zero, NaN for negatives and NaN */
        return eps_bits_to_float(x == 0.0f ? 0xff800000u : 0x7fc00000u);
    uint32_t u = eps_float_to_bits(x);
    if (u >= 0x7f800000u) return x; /* +inf */
    int32_t e = 0;
    if (u < 0x00800000u) { /* subnormal: scale by 2^23 into the normal range */
        u = eps_float_to_bits(x * 8388608.0f);
        e = -23;
    }
    e += (int32_t)(u >> 23) - 127;
    float m = eps_bits_to_float((u & 0x007fffffu) | 0x3f800000u);
    if (m > 1.41421356f) {
        m *= 0.5f;
        e += 1;
    }
    float f = m - 1.0f;
    float s = f / (2.0f + f);
    float s2 = s * s;
    float q = 2.0f / 11.0f;
    q = q * s2 + 2.0f / 9.0f;
    q = q * s2 + 2.0f / 7.0f;
    q = q * s2 + 2.0f / 5.0f;
    q = q * s2 + 2.0f / 3.0f;
    float lm = f - s * (f - q * s2);
    float ef = (float)e;
    return ef * 0.693145751953125f + (lm + ef * 1.428606765330187e-06f);
}

/* ln(1 + x) for x >= 0, accurate for tiny x (the u-1 correction trick). */
EPS_INLINE float eps_log1pf_inline(float x) {
    float u = 1.0f + x;
    float d = u - 1.0f;
    if (d == 0.0f) return x;
    return eps_logf_inline(u) * (x / d);
}

/* tanh: an odd Taylor polynomial below |x| = 0.5 (no cancellation), else
 * 1 - 2 / (e^{2|x|} + 1); both computed and selected, so loops vectorize. */
EPS_INLINE float eps_tanhf_inline(float x) {
    uint32_t sign = eps_float_to_bits(x) & 0x80000000u;
    float a = eps_bits_to_float(eps_float_to_bits(x) & 0x7fffffffu);
    float a2 = a * a;
    float p = 21844.0f / 6081075.0f;
    p = p * a2 - 1382.0f / 155925.0f;
    p = p * a2 + 62.0f / 2835.0f;
    p = p * a2 - 17.0f / 315.0f;
    p = p * a2 + 2.0f / 15.0f;
    p = p * a2 - 1.0f / 3.0f;
    float small = a + a * a2 * p;
    float ac = eps_select(a < 9.0f, a, 9.0f);
    float big = 1.0f - 2.0f / (eps_expf_inline(2.0f * ac) + 1.0f);
    float t = eps_select(a < 0.5f, small, big);
    t = eps_bits_to_float(eps_float_to_bits(t) | sign);
    return eps_select(x == x, t, x);
}

/* sqrt without libm: the compiler builtin is one instruction on FPUs that have
 * it (given -fno-math-errno); elsewhere Newton steps from a bit-level guess */
EPS_INLINE float eps_sqrtf_inline(float x) {
#if defined(__GNUC__) && !defined(EPS_NO_BUILTIN_SQRT)
    return __builtin_sqrtf(x);
#else
    if (!(x > 0.0f)) return x == 0.0f ? x : eps_bits_to_float(0x7fc00000u);
    if (eps_float_to_bits(x) >= 0x7f800000u) return x;
    float g = eps_bits_to_float((eps_float_to_bits(x) >> 1) + 0x1fbd1df5u);
    for (int i = 0; i < 4; i++) g = 0.5f * (g + x / g);
    return g;
#endif
}

#endif
