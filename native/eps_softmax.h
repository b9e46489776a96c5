/* Softmax cross-entropy over rows of logits (internal; inline), shared by the
 * dense models (eps_model.c) and the conv nets (eps_conv.c). */
#ifndef EPS_SOFTMAX_H
#define EPS_SOFTMAX_H
#include <stdint.h>

#include "eps_math_inline.h"
#include "eps_port.h"

/* Softmax rows in place via log-sum-exp; returns the summed cross-entropy
 * when labels are given, and then leaves (p - onehot) * inv_batch instead. */
EPS_INLINE double eps_softmax_rows(float *z, int32_t rows, int32_t C, const int32_t *y,
                                   float inv_batch) {
    double loss = 0.0;
    for (int32_t i = 0; i < rows; i++) {
        float *r = z + i * C;
        float mx = r[0];
        for (int32_t j = 1; j < C; j++) mx = r[j] > mx ? r[j] : mx;
        float zy = y ? r[y[i]] : 0.0f, sum = 0.0f;
        for (int32_t j = 0; j < C; j++) r[j] = eps_expf_inline(r[j] - mx);
        for (int32_t j = 0; j < C; j++) sum += r[j];
        float scale = (y ? inv_batch : 1.0f) / sum;
        for (int32_t j = 0; j < C; j++) r[j] *= scale;
        if (y) {
            loss += (double)(eps_logf_inline(sum) - (zy - mx));
            r[y[i]] -= inv_batch;
        }
    }
    return loss;
}

#endif
