#include <string.h>

#include "eps.h"
#include "eps_math_inline.h"
#include "eps_linalg.h"
#include "eps_softmax.h"

/* Widths from input to output; returns the number of layers. */
static int32_t eps_sizes(const EpsModel *m, int32_t sizes[EPS_MAX_HIDDEN + 2]) {
    sizes[0] = m->n_features;
    for (int32_t l = 0; l < m->n_hidden; l++) sizes[l + 1] = m->hidden[l];
    sizes[m->n_hidden + 1] = m->n_classes;
    return m->n_hidden + 1;
}

static int32_t eps_chunk_rows(int32_t batch) {
    return batch < EPS_BATCH_CHUNK ? batch : EPS_BATCH_CHUNK;
}

EPS_MAYBE_UNUSED static int eps_dim_ok(int32_t d) { return d >= 1 && d <= EPS_MAX_DIM; }

EPS_MAYBE_UNUSED static int eps_model_ok(const EpsModel *m) {
    if (!m || m->kind < EpsLinear || m->kind > EpsMlp) return 0;
    if (!eps_dim_ok(m->n_features) || !eps_dim_ok(m->n_classes)) return 0;
    int is_mlp = m->kind == EpsMlp;
    if (is_mlp ? (m->n_hidden < 1 || m->n_hidden > EPS_MAX_HIDDEN) : m->n_hidden != 0)
        return 0;
    for (int32_t l = 0; l < m->n_hidden; l++)
        if (!eps_dim_ok(m->hidden[l])) return 0;
    if (m->activation != EpsRelu && m->activation != EpsTanh) return 0;
    if (m->kind <= EpsLogistic) return m->n_classes == 1;
    return m->n_classes >= 2;
}

/* Sizes as int64 so that absurd models are rejected instead of overflowing. */
static int64_t eps_n_params64(const EpsModel *m) {
    int32_t s[EPS_MAX_HIDDEN + 2];
    int32_t L = eps_sizes(m, s);
    int64_t n = 0;
    for (int32_t l = 0; l < L; l++) n += (int64_t)s[l] * s[l + 1] + s[l + 1];
    return n;
}

/* Layers this narrow use the transposed (dot-product) kernels. */
#define EPS_NARROW 16

static int eps_narrow(int32_t n_out) { return n_out < EPS_NARROW; }

EPS_MAYBE_UNUSED static int64_t eps_scratch64(const EpsModel *m, int32_t batch) {
    int32_t s[EPS_MAX_HIDDEN + 2];
    int32_t L = eps_sizes(m, s);
    int64_t rows = eps_chunk_rows(batch), n = 0, widest = 0;
    for (int32_t l = 0; l < L; l++) {
        int64_t w = (int64_t)s[l] * s[l + 1];
        if (l > 0 || eps_narrow(s[l + 1])) n += w; /* W^T */
        if (eps_narrow(s[l + 1])) n += w;          /* gradient of W^T */
    }
    for (int32_t l = 1; l < L; l++) {
        n += rows * s[l]; /* activations */
        if (s[l] > widest) widest = s[l];
    }
    n += rows * s[L];       /* logits, then their gradient */
    n += 2 * rows * widest; /* ping-pong gradients of hidden layers */
    return n;
}

#ifndef EPS_VARIANT_AVX2 /* sizes and checks: built once, in the baseline */
int32_t eps_model_n_params(const EpsModel *m) {
    if (!eps_model_ok(m)) return -1;
    int64_t n = eps_n_params64(m);
    return n > INT32_MAX ? -1 : (int32_t)n;
}

int32_t eps_model_scratch_length(const EpsModel *m, int32_t batch) {
    if (!eps_model_ok(m) || batch < 1) return -1;
    int64_t n = eps_scratch64(m, batch);
    return n > INT32_MAX ? -1 : (int32_t)n;
}

EpsStatus eps_model_check(const EpsModel *m, int32_t params_length,
                          int32_t scratch_length, int32_t batch) {
    if (!eps_model_ok(m) || batch < 1) return EpsErrValue;
    int32_t n = eps_model_n_params(m), need = eps_model_scratch_length(m, batch);
    if (n < 0 || need < 0) return EpsErrValue;
    if (params_length != n || scratch_length < need) return EpsErrLength;
    return EpsOk;
}
#endif

/* Pointers into the caller's scratch, laid out as eps_scratch64 counts it. */
typedef struct {
    int32_t L;
    int32_t s[EPS_MAX_HIDDEN + 2];
    const float *W[EPS_MAX_HIDDEN + 1], *b[EPS_MAX_HIDDEN + 1];
    float *WT[EPS_MAX_HIDDEN + 1], *GT[EPS_MAX_HIDDEN + 1], *act[EPS_MAX_HIDDEN + 1];
    float *logits, *d0, *d1;
} EpsPlan;

static void eps_plan(const EpsModel *m, const float *params, float *scratch,
                     int32_t batch, EpsPlan *p) {
    p->L = eps_sizes(m, p->s);
    int32_t rows = eps_chunk_rows(batch), widest = 0;
    const float *q = params;
    float *f = scratch;
    for (int32_t l = 0; l < p->L; l++) {
        int32_t w = p->s[l] * p->s[l + 1];
        p->W[l] = q;
        q += w;
        p->b[l] = q;
        q += p->s[l + 1];
        p->WT[l] = p->GT[l] = NULL;
        if (l > 0 || eps_narrow(p->s[l + 1])) {
            p->WT[l] = f;
            f += w;
        }
        if (eps_narrow(p->s[l + 1])) {
            p->GT[l] = f;
            f += w;
        }
    }
    p->act[0] = NULL;
    for (int32_t l = 1; l < p->L; l++) {
        p->act[l] = f;
        f += rows * p->s[l];
        if (p->s[l] > widest) widest = p->s[l];
    }
    p->logits = f;
    f += rows * p->s[p->L];
    p->d0 = f;
    f += rows * widest;
    p->d1 = f;
}

EPS_INLINE void eps_activate(float *h, int32_t n, int32_t activation) {
    if (activation == EpsRelu) {
        for (int32_t i = 0; i < n; i++) h[i] = h[i] > 0.0f ? h[i] : 0.0f;
    } else {
        for (int32_t i = 0; i < n; i++) h[i] = eps_tanhf_inline(h[i]);
    }
}

/* g *= f'(pre-activation), written in terms of the activation output h */
EPS_INLINE void eps_activation_grad(float *restrict g, const float *restrict h, int32_t n,
                                int32_t activation) {
    if (activation == EpsRelu) {
        for (int32_t i = 0; i < n; i++) g[i] = h[i] > 0.0f ? g[i] : 0.0f;
    } else {
        for (int32_t i = 0; i < n; i++) g[i] *= 1.0f - h[i] * h[i];
    }
}

/* Hidden layers for `rows` rows of x, then the output layer into `out`. */
EPS_INLINE void eps_forward_chunk(const EpsModel *m, const EpsPlan *p, const float *x,
                              int32_t rows, float *out) {
    const float *in = x;
    for (int32_t l = 0; l < p->L; l++) {
        float *dst = l + 1 < p->L ? p->act[l + 1] : out;
        if (p->GT[l])
            eps_gemm_nt(in, p->WT[l], p->b[l], dst, rows, p->s[l], p->s[l + 1]);
        else
            eps_gemm_nn(in, p->W[l], p->b[l], dst, rows, p->s[l], p->s[l + 1]);
        if (l + 1 < p->L) eps_activate(dst, rows * p->s[l + 1], m->activation);
        in = dst;
    }
}

/* Output gradient (scaled by inv_batch) in place of z; returns the summed loss. */
EPS_INLINE double eps_output_grad(const EpsModel *m, float *z, int32_t rows,
                              const int32_t *y, const float *t, float inv_batch) {
    double loss = 0.0;
    if (m->kind == EpsLinear) {
        for (int32_t i = 0; i < rows; i++) {
            float r = z[i] - t[i];
            loss += (double)(r * r);
            z[i] = 2.0f * inv_batch * r;
        }
    } else if (m->kind == EpsLogistic) {
        for (int32_t i = 0; i < rows; i++) {
            float v = z[i], e = eps_expf_inline(v < 0.0f ? v : -v);
            float yf = (float)y[i];
            float prob = v >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
            loss += (double)((v > 0.0f ? v : 0.0f) - yf * v + eps_log1pf_inline(e));
            z[i] = (prob - yf) * inv_batch;
        }
    } else {
        loss = eps_softmax_rows(z, rows, m->n_classes, y, inv_batch);
    }
    return loss;
}

EPS_INLINE void eps_backward_chunk(const EpsModel *m, const EpsPlan *p, const float *x,
                               int32_t rows, float *grad) {
    float *dz = p->logits, *spare = p->d0;
    float *g = grad;
    float *gW[EPS_MAX_HIDDEN + 1], *gb[EPS_MAX_HIDDEN + 1];
    for (int32_t l = 0; l < p->L; l++) {
        gW[l] = g;
        g += p->s[l] * p->s[l + 1];
        gb[l] = g;
        g += p->s[l + 1];
    }
    for (int32_t l = p->L - 1; l >= 0; l--) {
        const float *in = l > 0 ? p->act[l] : x;
        eps_colsum_acc(dz, gb[l], rows, p->s[l + 1]);
        if (p->GT[l]) /* narrow: accumulate W's gradient transposed, rows of K */
            eps_gemm_tn(dz, in, p->GT[l], rows, p->s[l + 1], p->s[l]);
        else
            eps_gemm_tn(in, dz, gW[l], rows, p->s[l], p->s[l + 1]);
        if (l == 0) break;
        eps_gemm_nn(dz, p->WT[l], NULL, spare, rows, p->s[l + 1], p->s[l]);
        eps_activation_grad(spare, p->act[l], rows * p->s[l], m->activation);
        dz = spare;
        spare = spare == p->d0 ? p->d1 : p->d0;
    }
}

EpsStatus EPS_FN(eps_model_loss_grad)(const EpsModel *m, const float *params, const float *x,
                              int32_t batch, const int32_t *labels,
                              const float *targets, float *grad, float *scratch,
                              float *loss) {
    if (m->kind != EpsLinear) {
        int32_t hi = m->kind == EpsLogistic ? 2 : m->n_classes;
        uint32_t bad = 0;
        for (int32_t i = 0; i < batch; i++) bad |= (uint32_t)labels[i] >= (uint32_t)hi;
        if (bad) return EpsErrValue;
    }
    EpsPlan p;
    eps_plan(m, params, scratch, batch, &p);
    for (int32_t l = 0; l < p.L; l++) {
        size_t w = (size_t)p.s[l] * (size_t)p.s[l + 1];
        if (p.WT[l]) eps_transpose(p.W[l], p.WT[l], p.s[l], p.s[l + 1]);
        if (p.GT[l]) memset(p.GT[l], 0, sizeof(float) * w);
    }
    memset(grad, 0, sizeof(float) * (size_t)eps_n_params64(m));
    float inv_batch = 1.0f / (float)batch;
    double total = 0.0;
    int32_t F = m->n_features;
    for (int32_t r0 = 0; r0 < batch; r0 += EPS_BATCH_CHUNK) {
        int32_t rows = batch - r0 < EPS_BATCH_CHUNK ? batch - r0 : EPS_BATCH_CHUNK;
        const float *xc = x + (int64_t)r0 * F;
        eps_forward_chunk(m, &p, xc, rows, p.logits);
        total += eps_output_grad(m, p.logits, rows, labels ? labels + r0 : NULL,
                                 targets ? targets + r0 : NULL, inv_batch);
        eps_backward_chunk(m, &p, xc, rows, grad);
    }
    /* narrow layers accumulated W's gradient transposed: put it in place */
    float *gw = grad;
    for (int32_t l = 0; l < p.L; l++) {
        if (p.GT[l]) eps_transpose(p.GT[l], gw, p.s[l + 1], p.s[l]);
        gw += p.s[l] * p.s[l + 1] + p.s[l + 1];
    }
    *loss = (float)(total / (double)batch);
    return EpsOk;
}

void EPS_FN(eps_model_forward)(const EpsModel *m, const float *params, const float *x,
                       int32_t batch, float *out, float *scratch) {
    EpsPlan p;
    eps_plan(m, params, scratch, batch, &p);
    for (int32_t l = 0; l < p.L; l++)
        if (p.GT[l]) eps_transpose(p.W[l], p.WT[l], p.s[l], p.s[l + 1]);
    int32_t F = m->n_features, C = m->n_classes;
    for (int32_t r0 = 0; r0 < batch; r0 += EPS_BATCH_CHUNK) {
        int32_t rows = batch - r0 < EPS_BATCH_CHUNK ? batch - r0 : EPS_BATCH_CHUNK;
        float *o = out + (int64_t)r0 * C;
        eps_forward_chunk(m, &p, x + (int64_t)r0 * F, rows, o);
        if (m->kind == EpsLogistic) {
            for (int32_t i = 0; i < rows; i++) {
                float v = o[i], e = eps_expf_inline(v < 0.0f ? v : -v);
                o[i] = v >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
            }
        } else if (m->kind != EpsLinear) {
            eps_softmax_rows(o, rows, C, NULL, 1.0f);
        }
    }
}
