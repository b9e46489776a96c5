/* Small dense row-major products used by the models (internal, all inline).
 *
 * Loops are blocked by four rows and/or four reduction steps so each load
 * and store of the output feeds several multiply-adds, and every inner loop
 * runs over contiguous memory so it vectorizes without reassociating sums.
 */
#ifndef EPS_LINALG_H
#define EPS_LINALG_H
#include <stdint.h>

#include "eps_port.h"

/* sum of 8 partial sums, pairwise */
EPS_INLINE float eps_sum8(const float *s) {
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

/* sum a[i] * b[i] with independent partial sums (vector lanes, no
 * reassociation flags needed): 32 lanes for long vectors, 8 for the tail */
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

/* c[0:n] += a0 b0 + a1 b1 + a2 b2 + a3 b3 */
EPS_INLINE void eps_axpy4(float *restrict c, float a0, const float *restrict b0,
                          float a1, const float *restrict b1, float a2,
                          const float *restrict b2, float a3,
                          const float *restrict b3, int32_t n) {
    for (int32_t j = 0; j < n; j++)
        c[j] += a0 * b0[j] + a1 * b1[j] + a2 * b2[j] + a3 * b3[j];
}

EPS_INLINE void eps_axpy(float *restrict c, float a, const float *restrict b,
                         int32_t n) {
    for (int32_t j = 0; j < n; j++) c[j] += a * b[j];
}

/* one output row: c = bias + a[0:K] @ B[K,N] */
EPS_INLINE void eps_row_mm(const float *restrict a, const float *restrict B,
                           const float *restrict bias, float *restrict c,
                           int32_t K, int32_t N) {
    for (int32_t j = 0; j < N; j++) c[j] = bias[j];
    int32_t k = 0;
    for (; k + 4 <= K; k += 4)
        eps_axpy4(c, a[k], B + k * N, a[k + 1], B + (k + 1) * N, a[k + 2],
                  B + (k + 2) * N, a[k + 3], B + (k + 3) * N, N);
    for (; k < K; k++) eps_axpy(c, a[k], B + k * N, N);
}

/* C[M,N] = bias + A[M,K] @ B[K,N]; four rows share each load of B */
EPS_INLINE void eps_mm_bias(const float *restrict A, const float *restrict B,
                            const float *restrict bias, float *restrict C,
                            int32_t M, int32_t K, int32_t N) {
    if (N == 1) {
        for (int32_t i = 0; i < M; i++) C[i] = bias[0] + eps_dot(A + i * K, B, K);
        return;
    }
    int32_t i = 0;
    for (; i + 4 <= M; i += 4) {
        const float *a0 = A + i * K, *a1 = a0 + K, *a2 = a1 + K, *a3 = a2 + K;
        float *restrict c0 = C + i * N;
        float *restrict c1 = c0 + N;
        float *restrict c2 = c1 + N;
        float *restrict c3 = c2 + N;
        for (int32_t j = 0; j < N; j++) c0[j] = c1[j] = c2[j] = c3[j] = bias[j];
        for (int32_t k = 0; k < K; k++) {
            const float *restrict b = B + k * N;
            float x0 = a0[k], x1 = a1[k], x2 = a2[k], x3 = a3[k];
            for (int32_t j = 0; j < N; j++) {
                float bj = b[j];
                c0[j] += x0 * bj;
                c1[j] += x1 * bj;
                c2[j] += x2 * bj;
                c3[j] += x3 * bj;
            }
        }
    }
    for (; i < M; i++) eps_row_mm(A + i * K, B, bias, C + i * N, K, N);
}

/* G[K,N] += A[M,K]^T @ D[M,N]; gb[N] += column sums of D */
EPS_INLINE void eps_mm_tn_acc(const float *restrict A, const float *restrict D,
                              float *restrict G, float *restrict gb, int32_t M,
                              int32_t K, int32_t N) {
    int32_t i = 0;
    if (N == 1) { /* one output: accumulate rows of A, vectorized over K */
        for (; i + 4 <= M; i += 4) {
            const float *a0 = A + i * K;
            eps_axpy4(G, D[i], a0, D[i + 1], a0 + K, D[i + 2], a0 + 2 * K, D[i + 3],
                      a0 + 3 * K, K);
            gb[0] += (D[i] + D[i + 1]) + (D[i + 2] + D[i + 3]);
        }
    }
    for (; i + 4 <= M; i += 4) {
        const float *a0 = A + i * K, *a1 = a0 + K, *a2 = a1 + K, *a3 = a2 + K;
        const float *d0 = D + i * N, *d1 = d0 + N, *d2 = d1 + N, *d3 = d2 + N;
        for (int32_t k = 0; k < K; k++)
            eps_axpy4(G + k * N, a0[k], d0, a1[k], d1, a2[k], d2, a3[k], d3, N);
        for (int32_t j = 0; j < N; j++) gb[j] += (d0[j] + d1[j]) + (d2[j] + d3[j]);
    }
    for (; i < M; i++) {
        const float *a = A + i * K, *d = D + i * N;
        for (int32_t k = 0; k < K; k++) eps_axpy(G + k * N, a[k], d, N);
        for (int32_t j = 0; j < N; j++) gb[j] += d[j];
    }
}

/* H[M,K] = D[M,N] @ W^T, given WT = W^T stored (N,K) row-major */
EPS_INLINE void eps_mm_nt(const float *restrict D, const float *restrict WT,
                          float *restrict H, int32_t M, int32_t K, int32_t N) {
    for (int32_t i = 0; i < M; i++) {
        const float *d = D + i * N;
        float *restrict h = H + i * K;
        for (int32_t k = 0; k < K; k++) h[k] = 0.0f;
        int32_t j = 0;
        for (; j + 4 <= N; j += 4)
            eps_axpy4(h, d[j], WT + j * K, d[j + 1], WT + (j + 1) * K, d[j + 2],
                      WT + (j + 2) * K, d[j + 3], WT + (j + 3) * K, K);
        for (; j < N; j++) eps_axpy(h, d[j], WT + j * K, K);
    }
}

/* T[N,K] = W[K,N]^T */
EPS_INLINE void eps_transpose(const float *restrict W, float *restrict T, int32_t K,
                              int32_t N) {
    for (int32_t k = 0; k < K; k++)
        for (int32_t j = 0; j < N; j++) T[j * K + k] = W[k * N + j];
}

#endif
