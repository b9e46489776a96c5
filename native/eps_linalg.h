/* Dense row-major products for the models (internal; all inline).
 *
 * Three shapes cover forward and backward passes:
 *   nn: C[M,Q] = bias + U[M,P] V[P,Q]   (layer forward, hidden gradients)
 *   tn: C[P,Q] += U[M,P]^T V[M,Q]       (weight gradients)
 *   nt: C[M,Q] = bias + U[M,P] V[Q,P]^T (forward of narrow output layers)
 * With GCC or clang, register-blocked tiles use the generic vector extension
 * (8 floats; lowered to whatever the target has, AVX2+FMA in the dispatched
 * clone). Other compilers, or EPS_PORTABLE, get the plain loops below.
 */
#ifndef EPS_LINALG_H
#define EPS_LINALG_H
#include <stdint.h>
#include <string.h>

#include "eps_port.h"

/* sum of 8 partial sums, pairwise */
EPS_INLINE float eps_sum8(const float *s) {
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

/* sum a[i] * b[i] with independent partial sums (vector lanes without
 * reassociation flags): 32 lanes for long vectors, 8 for the tail */
EPS_INLINE float eps_dot(const float *restrict a, const float *restrict b, int32_t n) {
    float s[32] = {0}, t[8] = {0};
    int32_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const float *pa = a + i, *pb = b + i;
        for (int32_t l = 0; l < 32; l++) s[l] += pa[l] * pb[l];
    }
    for (int32_t l = 0; l < 8; l++) t[l] = (s[l] + s[l + 8]) + (s[l + 16] + s[l + 24]);
    for (; i + 8 <= n; i += 8) {
        const float *pa = a + i, *pb = b + i;
        for (int32_t l = 0; l < 8; l++) t[l] += pa[l] * pb[l];
    }
    float r = eps_sum8(t);
    for (; i < n; i++) r += a[i] * b[i];
    return r;
}

/* T[N,K] = W[K,N]^T */
EPS_INLINE void eps_transpose(const float *restrict W, float *restrict T, int32_t K,
                              int32_t N) {
    for (int32_t k = 0; k < K; k++)
        for (int32_t j = 0; j < N; j++) T[j * K + k] = W[k * N + j];
}

/* gb[Q] += column sums of D[M,Q] */
EPS_INLINE void eps_colsum_acc(const float *restrict D, float *restrict gb, int32_t M,
                               int32_t Q) {
    for (int32_t i = 0; i < M; i++) {
        const float *d = D + i * Q;
        for (int32_t q = 0; q < Q; q++) gb[q] += d[q];
    }
}

#if defined(__GNUC__) && !defined(EPS_PORTABLE)
#include "eps_linalg_vec.h"
#else

EPS_INLINE void eps_gemm_nn(const float *restrict U, const float *restrict V,
                            const float *restrict bias, float *restrict C, int32_t M,
                            int32_t P, int32_t Q) {
    for (int32_t i = 0; i < M; i++) {
        float *c = C + i * Q;
        for (int32_t q = 0; q < Q; q++) c[q] = bias ? bias[q] : 0.0f;
        for (int32_t k = 0; k < P; k++) {
            float u = U[i * P + k];
            const float *v = V + k * Q;
            for (int32_t q = 0; q < Q; q++) c[q] += u * v[q];
        }
    }
}

EPS_INLINE void eps_gemm_tn(const float *restrict U, const float *restrict V,
                            float *restrict C, int32_t M, int32_t P, int32_t Q) {
    for (int32_t i = 0; i < M; i++) {
        const float *v = V + i * Q;
        for (int32_t p = 0; p < P; p++) {
            float u = U[i * P + p];
            float *c = C + p * Q;
            for (int32_t q = 0; q < Q; q++) c[q] += u * v[q];
        }
    }
}

EPS_INLINE void eps_gemm_nt(const float *restrict U, const float *restrict V,
                            const float *restrict bias, float *restrict C, int32_t M,
                            int32_t P, int32_t Q) {
    for (int32_t i = 0; i < M; i++)
        for (int32_t q = 0; q < Q; q++)
            C[i * Q + q] = (bias ? bias[q] : 0.0f) + eps_dot(U + i * P, V + q * P, P);
}

#endif
#endif
