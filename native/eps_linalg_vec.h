/* Register-blocked tiles of eps_linalg.h with the GCC/clang vector extension.
 * Included only from eps_linalg.h; every tile has a scalar edge path. */
#ifndef EPS_LINALG_VEC_H
#define EPS_LINALG_VEC_H

/* always inlined, so the AVX argument-passing ABI note does not apply */
#pragma GCC diagnostic ignored "-Wpsabi"

typedef float eps_v8 __attribute__((vector_size(32)));

EPS_INLINE eps_v8 eps_ld8(const float *p) {
    eps_v8 v;
    memcpy(&v, p, sizeof v);
    return v;
}

EPS_INLINE void eps_st8(float *p, eps_v8 v) { memcpy(p, &v, sizeof v); }

EPS_INLINE eps_v8 eps_splat8(float x) { return (eps_v8){x, x, x, x, x, x, x, x}; }

EPS_INLINE float eps_hsum8(eps_v8 v) {
    return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

/* rows r0..r0+R-1 of C, columns q0..q0+8W-1; R <= 4, W <= 2 are constants
 * after inlining, so the accumulators live in registers */
EPS_INLINE void eps_nn_tile(const float *restrict U, const float *restrict V,
                            const float *restrict bias, float *restrict C, int32_t P,
                            int32_t Q, int32_t i, int32_t q0, const int R,
                            const int W) {
    eps_v8 acc[4][2];
    for (int r = 0; r < R; r++)
        for (int w = 0; w < W; w++)
            acc[r][w] = bias ? eps_ld8(bias + q0 + 8 * w) : eps_splat8(0.0f);
    for (int32_t k = 0; k < P; k++) {
        const float *v = V + k * Q + q0;
        eps_v8 b[2];
        for (int w = 0; w < W; w++) b[w] = eps_ld8(v + 8 * w);
        for (int r = 0; r < R; r++) {
            eps_v8 u = eps_splat8(U[(i + r) * P + k]);
            for (int w = 0; w < W; w++) acc[r][w] += u * b[w];
        }
    }
    for (int r = 0; r < R; r++)
        for (int w = 0; w < W; w++) eps_st8(C + (i + r) * Q + q0 + 8 * w, acc[r][w]);
}

EPS_INLINE void eps_gemm_nn(const float *restrict U, const float *restrict V,
                            const float *restrict bias, float *restrict C, int32_t M,
                            int32_t P, int32_t Q) {
    int32_t q0 = 0;
    for (; q0 + 16 <= Q; q0 += 16) {
        int32_t i = 0;
        for (; i + 4 <= M; i += 4) eps_nn_tile(U, V, bias, C, P, Q, i, q0, 4, 2);
        for (; i < M; i++) eps_nn_tile(U, V, bias, C, P, Q, i, q0, 1, 2);
    }
    for (; q0 + 8 <= Q; q0 += 8) {
        int32_t i = 0;
        for (; i + 4 <= M; i += 4) eps_nn_tile(U, V, bias, C, P, Q, i, q0, 4, 1);
        for (; i < M; i++) eps_nn_tile(U, V, bias, C, P, Q, i, q0, 1, 1);
    }
    for (; q0 < Q; q0++)
        for (int32_t i = 0; i < M; i++) {
            float c = bias ? bias[q0] : 0.0f;
            for (int32_t k = 0; k < P; k++) c += U[i * P + k] * V[k * Q + q0];
            C[i * Q + q0] = c;
        }
}

/* C rows p..p+R-1, columns q0..q0+8W-1 of C[P,Q] += U[M,P]^T V[M,Q] */
EPS_INLINE void eps_tn_tile(const float *restrict U, const float *restrict V,
                            float *restrict C, int32_t M, int32_t P, int32_t Q,
                            int32_t p, int32_t q0, const int R, const int W) {
    eps_v8 acc[4][2];
    for (int r = 0; r < R; r++)
        for (int w = 0; w < W; w++) acc[r][w] = eps_ld8(C + (p + r) * Q + q0 + 8 * w);
    for (int32_t i = 0; i < M; i++) {
        const float *v = V + i * Q + q0;
        eps_v8 b[2];
        for (int w = 0; w < W; w++) b[w] = eps_ld8(v + 8 * w);
        for (int r = 0; r < R; r++) {
            eps_v8 u = eps_splat8(U[i * P + p + r]);
            for (int w = 0; w < W; w++) acc[r][w] += u * b[w];
        }
    }
    for (int r = 0; r < R; r++)
        for (int w = 0; w < W; w++) eps_st8(C + (p + r) * Q + q0 + 8 * w, acc[r][w]);
}

EPS_INLINE void eps_gemm_tn(const float *restrict U, const float *restrict V,
                            float *restrict C, int32_t M, int32_t P, int32_t Q) {
    int32_t q0 = 0;
    for (; q0 + 16 <= Q; q0 += 16) {
        int32_t p = 0;
        for (; p + 4 <= P; p += 4) eps_tn_tile(U, V, C, M, P, Q, p, q0, 4, 2);
        for (; p < P; p++) eps_tn_tile(U, V, C, M, P, Q, p, q0, 1, 2);
    }
    for (; q0 + 8 <= Q; q0 += 8) {
        int32_t p = 0;
        for (; p + 4 <= P; p += 4) eps_tn_tile(U, V, C, M, P, Q, p, q0, 4, 1);
        for (; p < P; p++) eps_tn_tile(U, V, C, M, P, Q, p, q0, 1, 1);
    }
    for (; q0 < Q; q0++)
        for (int32_t p = 0; p < P; p++) {
            float c = C[p * Q + q0];
            for (int32_t i = 0; i < M; i++) c += U[i * P + p] * V[i * Q + q0];
            C[p * Q + q0] = c;
        }
}

/* rows i..i+R-1 against rows q..q+S-1 of V: R x S dot products along P */
EPS_INLINE void eps_nt_tile(const float *restrict U, const float *restrict V,
                            const float *restrict bias, float *restrict C, int32_t P,
                            int32_t Q, int32_t i, int32_t q, const int R,
                            const int S) {
    eps_v8 acc[2][4];
    for (int r = 0; r < R; r++)
        for (int s = 0; s < S; s++) acc[r][s] = eps_splat8(0.0f);
    int32_t k = 0;
    for (; k + 8 <= P; k += 8) {
        eps_v8 u[2], v[4];
        for (int r = 0; r < R; r++) u[r] = eps_ld8(U + (i + r) * P + k);
        for (int s = 0; s < S; s++) v[s] = eps_ld8(V + (q + s) * P + k);
        for (int r = 0; r < R; r++)
            for (int s = 0; s < S; s++) acc[r][s] += u[r] * v[s];
    }
    for (int r = 0; r < R; r++)
        for (int s = 0; s < S; s++) {
            float c = eps_hsum8(acc[r][s]);
            for (int32_t kk = k; kk < P; kk++)
                c += U[(i + r) * P + kk] * V[(q + s) * P + kk];
            C[(i + r) * Q + q + s] = (bias ? bias[q + s] : 0.0f) + c;
        }
}

EPS_INLINE void eps_gemm_nt(const float *restrict U, const float *restrict V,
                            const float *restrict bias, float *restrict C, int32_t M,
                            int32_t P, int32_t Q) {
    int32_t i = 0;
    for (; i + 2 <= M; i += 2) {
        int32_t q = 0;
        for (; q + 4 <= Q; q += 4) eps_nt_tile(U, V, bias, C, P, Q, i, q, 2, 4);
        for (; q < Q; q++) eps_nt_tile(U, V, bias, C, P, Q, i, q, 2, 1);
    }
    for (; i < M; i++) {
        int32_t q = 0;
        for (; q + 4 <= Q; q += 4) eps_nt_tile(U, V, bias, C, P, Q, i, q, 1, 4);
        for (; q < Q; q++) eps_nt_tile(U, V, bias, C, P, Q, i, q, 1, 1);
    }
}

#endif
