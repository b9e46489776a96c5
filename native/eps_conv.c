/* Conv nets (eps_conv.h): im2col into scratch, then the blocked products of
 * eps_linalg.h; pools and ReLU as direct loops.
 *
 * A 1-D layer is a 2-D one with height 1 (kernel 1 x K, no vertical stride
 * or padding), so one code path serves both. The batch is processed in
 * chunks of EPS_BATCH_CHUNK rows (bounded scratch); a convolution unrolls
 * its input for a group of samples at a time, about EPS_CONV_COLS output
 * positions, so the unrolled matrix stays in cache and the products are
 * wide enough to vectorize even for short signals.
 */
#include <string.h>

#include "eps.h"
#include "eps_linalg.h"
#include "eps_softmax.h"

#include "eps_conv_plan.h"

#ifndef EPS_VARIANT_AVX2 /* sizes and checks: built once, in the baseline */
int32_t eps_net_n_params(const EpsNet *net) {
    EpsGeo g[EPS_NET_MAX_LAYERS];
    int64_t n;
    if (!eps_net_geo(net, g, &n) || n > INT32_MAX) return -1;
    return (int32_t)n;
}

int32_t eps_net_n_classes(const EpsNet *net) {
    return eps_net_n_params(net) < 0 ? -1 : net->layers[net->n_layers - 1].n_out;
}

int32_t eps_net_scratch_length(const EpsNet *net, int32_t batch) {
    EpsNetPlan p;
    return (int32_t)eps_net_layout(net, batch, NULL, &p);
}

EpsStatus eps_net_check(const EpsNet *net, int32_t params_length,
                        int32_t scratch_length, int32_t batch) {
    int32_t n = eps_net_n_params(net), need = eps_net_scratch_length(net, batch);
    if (n < 0 || need < 0) return EpsErrValue;
    if (params_length != n || scratch_length < need) return EpsErrLength;
    return EpsOk;
}
#endif

/* first and one-past-last output index o with 0 <= o*s + t < n */
EPS_INLINE void eps_net_valid(int32_t t, int32_t s, int32_t n, int32_t count,
                              int32_t *lo, int32_t *hi) {
    int32_t a = t >= 0 ? 0 : (-t + s - 1) / s;
    int32_t b = n - t <= 0 ? 0 : (n - t - 1) / s + 1;
    if (b > count) b = count;
    if (a > b) a = b;
    *lo = a;
    *hi = b;
}

/* cols[(c, i, j)][s, oy, ox] = padded input of g samples, row length g * sp */
static void eps_im2col(const EpsGeo *q, const float *restrict in, int32_t g,
                       float *restrict cols) {
    int32_t gs = g * q->sp;
    for (int32_t c = 0; c < q->ic; c++)
        for (int32_t i = 0; i < q->kh; i++)
            for (int32_t j = 0; j < q->kw; j++) {
                float *row = cols + ((c * q->kh + i) * q->kw + j) * gs;
                int32_t ylo, yhi, xlo, xhi;
                eps_net_valid(i - q->ph, q->sh, q->ih, q->oh, &ylo, &yhi);
                eps_net_valid(j - q->pw, q->sw, q->iw, q->ow, &xlo, &xhi);
                for (int32_t s = 0; s < g; s++) {
                    const float *plane = in + (int64_t)s * q->n_in + c * q->ih * q->iw;
                    float *d = row + s * q->sp;
                    for (int32_t oy = 0; oy < q->oh; oy++, d += q->ow) {
                        if (oy < ylo || oy >= yhi) {
                            memset(d, 0, sizeof(float) * (size_t)q->ow);
                            continue;
                        }
                        /* input column ox * sw + off, in range for xlo <= ox < xhi */
                        const float *src = plane + (oy * q->sh + i - q->ph) * q->iw;
                        int32_t off = j - q->pw;
                        for (int32_t ox = 0; ox < xlo; ox++) d[ox] = 0.0f;
                        if (q->sw == 1 && xhi > xlo)
                            memcpy(d + xlo, src + xlo + off,
                                   sizeof(float) * (size_t)(xhi - xlo));
                        else
                            for (int32_t ox = xlo; ox < xhi; ox++) d[ox] = src[ox * q->sw + off];
                        for (int32_t ox = xhi; ox < q->ow; ox++) d[ox] = 0.0f;
                    }
                }
            }
}

/* dx (g samples) += the unrolled gradient dcols, folded back (col2im) */
static void eps_col2im(const EpsGeo *q, const float *restrict dcols, int32_t g,
                       float *restrict dx) {
    int32_t gs = g * q->sp;
    for (int32_t c = 0; c < q->ic; c++)
        for (int32_t i = 0; i < q->kh; i++)
            for (int32_t j = 0; j < q->kw; j++) {
                const float *row = dcols + ((c * q->kh + i) * q->kw + j) * gs;
                int32_t ylo, yhi, xlo, xhi;
                eps_net_valid(i - q->ph, q->sh, q->ih, q->oh, &ylo, &yhi);
                eps_net_valid(j - q->pw, q->sw, q->iw, q->ow, &xlo, &xhi);
                for (int32_t s = 0; s < g; s++) {
                    float *plane = dx + (int64_t)s * q->n_in + c * q->ih * q->iw;
                    const float *d = row + s * q->sp;
                    for (int32_t oy = ylo; oy < yhi; oy++) {
                        if (xhi <= xlo) continue;
                        /* from the first valid column: every address in range */
                        float *dst = plane + (oy * q->sh + i - q->ph) * q->iw +
                                     (xlo * q->sw + j - q->pw);
                        const float *v = d + oy * q->ow + xlo;
                        int32_t n = xhi - xlo;
                        if (q->sw == 1)
                            for (int32_t t = 0; t < n; t++) dst[t] += v[t];
                        else
                            for (int32_t t = 0; t < n; t++) dst[t * q->sw] += v[t];
                    }
                }
            }
}

static void eps_conv_fwd(const EpsNetPlan *p, const EpsGeo *q, const float *params,
                         const float *in, int32_t rows, float *out) {
    const float *W = params + q->w_off, *b = params + q->b_off;
    int32_t G = eps_net_group(q->sp, p->rows);
    for (int32_t r0 = 0; r0 < rows; r0 += G) {
        int32_t g = rows - r0 < G ? rows - r0 : G, gs = g * q->sp;
        eps_im2col(q, in + (int64_t)r0 * q->n_in, g, p->cols);
        eps_gemm_nn(W, p->cols, NULL, p->ybuf, q->oc, q->ckk, gs);
        for (int32_t s = 0; s < g; s++)
            for (int32_t n = 0; n < q->oc; n++) {
                const float *y = p->ybuf + n * gs + s * q->sp;
                float *o = out + (int64_t)(r0 + s) * q->n_out + n * q->sp, bn = b[n];
                for (int32_t t = 0; t < q->sp; t++) {
                    float v = y[t] + bn;
                    o[t] = v > 0.0f ? v : 0.0f;
                }
            }
    }
}

/* gradients of W and b from dy (rows x oc x sp); dx (zeroed here) if asked */
static void eps_conv_bwd(const EpsNetPlan *p, const EpsGeo *q, int32_t l,
                         const float *in, const float *dy, int32_t rows, float *grad,
                         float *dx) {
    float *gW = grad + q->w_off, *gb = grad + q->b_off;
    int32_t G = eps_net_group(q->sp, p->rows);
    if (dx) memset(dx, 0, sizeof(float) * (size_t)rows * (size_t)q->n_in);
    for (int32_t r0 = 0; r0 < rows; r0 += G) {
        int32_t g = rows - r0 < G ? rows - r0 : G, gs = g * q->sp;
        for (int32_t s = 0; s < g; s++)
            for (int32_t n = 0; n < q->oc; n++)
                memcpy(p->ybuf + n * gs + s * q->sp,
                       dy + (int64_t)(r0 + s) * q->n_out + n * q->sp,
                       sizeof(float) * (size_t)q->sp);
        for (int32_t n = 0; n < q->oc; n++) {
            const float *d = p->ybuf + n * gs;
            float acc = 0.0f;
            for (int32_t t = 0; t < gs; t++) acc += d[t];
            gb[n] += acc;
        }
        eps_im2col(q, in + (int64_t)r0 * q->n_in, g, p->cols);
        eps_gemm_nt(p->ybuf, p->cols, NULL, p->gtmp, q->oc, gs, q->ckk);
        for (int64_t t = 0; t < q->n_w; t++) gW[t] += p->gtmp[t];
        if (!dx) continue;
        eps_gemm_nn(p->WT[l], p->ybuf, NULL, p->cols, q->ckk, q->oc, gs);
        eps_col2im(q, p->cols, g, dx + (int64_t)r0 * q->n_in);
    }
}

/* One plane of a pool: KH and KW are constants after inlining for the common
 * 2-wide pools (0: the layer's own, at run time), so the taps unroll. */
EPS_INLINE void eps_pool_plane_fwd(const EpsGeo *q, const float *restrict x,
                                   float *restrict o, int max, const int KH,
                                   const int KW) {
    int32_t kh = KH ? KH : q->kh, kw = KW ? KW : q->kw, sw = q->sw;
    float inv = 1.0f / (float)(kh * kw);
    for (int32_t oy = 0; oy < q->oh; oy++) {
        const float *row = x + oy * q->sh * q->iw;
        float *dst = o + oy * q->ow;
        for (int32_t ox = 0; ox < q->ow; ox++) {
            const float *win = row + ox * sw;
            float v = max ? win[0] : 0.0f;
            for (int32_t i = 0; i < kh; i++)
                for (int32_t j = 0; j < kw; j++) {
                    float e = win[i * q->iw + j];
                    v = max ? (e > v ? e : v) : v + e;
                }
            dst[ox] = max ? v : v * inv;
        }
    }
}

static void eps_pool_fwd(const EpsGeo *q, const float *in, int32_t rows, float *out) {
    int32_t planes = rows * q->ic, max = q->op == EpsOpMaxPool;
    int32_t k2 = q->kw == 2 ? (q->kh == 2 ? 2 : q->kh == 1 ? 1 : 0) : 0;
    for (int32_t pl = 0; pl < planes; pl++) {
        const float *x = in + (int64_t)pl * q->ih * q->iw;
        float *o = out + (int64_t)pl * q->sp;
        if (k2 == 2)
            eps_pool_plane_fwd(q, x, o, max, 2, 2);
        else if (k2 == 1)
            eps_pool_plane_fwd(q, x, o, max, 1, 2);
        else
            eps_pool_plane_fwd(q, x, o, max, 0, 0);
    }
}

/* a plane's input gradient (accumulated into d); max: to the first maximum */
EPS_INLINE void eps_pool_plane_bwd(const EpsGeo *q, const float *restrict x,
                                   const float *restrict g, float *restrict d, int max,
                                   const int KH, const int KW) {
    int32_t kh = KH ? KH : q->kh, kw = KW ? KW : q->kw, sw = q->sw, iw = q->iw;
    float inv = 1.0f / (float)(kh * kw);
    for (int32_t oy = 0; oy < q->oh; oy++) {
        int32_t row = oy * q->sh * iw;
        const float *gr = g + oy * q->ow;
        for (int32_t ox = 0; ox < q->ow; ox++) {
            int32_t base = row + ox * sw;
            if (max) {
                int32_t best = base;
                float bv = x[base];
                for (int32_t i = 0; i < kh; i++)
                    for (int32_t j = 0; j < kw; j++) {
                        int32_t at = base + i * iw + j;
                        float e = x[at];
                        best = e > bv ? at : best;
                        bv = e > bv ? e : bv;
                    }
                d[best] += gr[ox];
            } else {
                float share = gr[ox] * inv;
                for (int32_t i = 0; i < kh; i++)
                    for (int32_t j = 0; j < kw; j++) d[base + i * iw + j] += share;
            }
        }
    }
}

/* dx (rows x n_in, overwritten) from dy; a max pool's to the first maximum */
static void eps_pool_bwd(const EpsGeo *q, const float *in, const float *dy,
                         int32_t rows, float *dx) {
    int32_t planes = rows * q->ic, max = q->op == EpsOpMaxPool;
    int32_t k2 = q->kw == 2 ? (q->kh == 2 ? 2 : q->kh == 1 ? 1 : 0) : 0;
    memset(dx, 0, sizeof(float) * (size_t)rows * (size_t)q->n_in);
    for (int32_t pl = 0; pl < planes; pl++) {
        const float *x = in + (int64_t)pl * q->ih * q->iw;
        float *d = dx + (int64_t)pl * q->ih * q->iw;
        const float *g = dy + (int64_t)pl * q->sp;
        if (k2 == 2)
            eps_pool_plane_bwd(q, x, g, d, max, 2, 2);
        else if (k2 == 1)
            eps_pool_plane_bwd(q, x, g, d, max, 1, 2);
        else
            eps_pool_plane_bwd(q, x, g, d, max, 0, 0);
    }
}

static void eps_dense_fwd(const EpsNetPlan *p, int32_t l, const float *params,
                          const float *in, int32_t rows, float *out) {
    const EpsGeo *q = &p->g[l];
    const float *b = params + q->b_off;
    if (q->narrow)
        eps_gemm_nt(in, p->WT[l], b, out, rows, q->n_in, q->n_out);
    else
        eps_gemm_nn(in, params + q->w_off, b, out, rows, q->n_in, q->n_out);
    if (q->relu) {
        int32_t n = rows * q->n_out;
        for (int32_t i = 0; i < n; i++) out[i] = out[i] > 0.0f ? out[i] : 0.0f;
    }
}

static void eps_dense_bwd(const EpsNetPlan *p, int32_t l, const float *in,
                          const float *dy, int32_t rows, float *grad, float *dx) {
    const EpsGeo *q = &p->g[l];
    eps_colsum_acc(dy, grad + q->b_off, rows, q->n_out);
    if (q->narrow) /* accumulate W's gradient transposed, rows of n_in */
        eps_gemm_tn(dy, in, p->GT[l], rows, q->n_out, q->n_in);
    else
        eps_gemm_tn(in, dy, grad + q->w_off, rows, q->n_in, q->n_out);
    if (dx) eps_gemm_nn(dy, p->WT[l], NULL, dx, rows, q->n_out, q->n_in);
}

/* every layer for `rows` rows of x; the logits land in act[L-1] */
static void eps_net_fwd_chunk(const EpsNetPlan *p, const float *params, const float *x,
                              int32_t rows) {
    const float *in = x;
    for (int32_t l = 0; l < p->L; l++) {
        const EpsGeo *q = &p->g[l];
        float *out = p->act[l];
        if (q->op == EpsOpConv)
            eps_conv_fwd(p, q, params, in, rows, out);
        else if (q->op == EpsOpDense)
            eps_dense_fwd(p, l, params, in, rows, out);
        else
            eps_pool_fwd(q, in, rows, out);
        in = out;
    }
}

/* from the logits' gradient in act[L-1] down to layer 0 (no input gradient) */
static void eps_net_bwd_chunk(const EpsNetPlan *p, const float *x, int32_t rows,
                              float *grad) {
    float *dy = p->act[p->L - 1], *spare = p->d0;
    for (int32_t l = p->L - 1; l >= 0; l--) {
        const EpsGeo *q = &p->g[l];
        const float *in = l > 0 ? p->act[l - 1] : x;
        float *dx = l > 0 ? spare : NULL;
        if (q->relu) {
            const float *y = p->act[l];
            int32_t n = rows * q->n_out;
            for (int32_t i = 0; i < n; i++) dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
        }
        if (q->op == EpsOpConv)
            eps_conv_bwd(p, q, l, in, dy, rows, grad, dx);
        else if (q->op == EpsOpDense)
            eps_dense_bwd(p, l, in, dy, rows, grad, dx);
        else if (dx) /* a pool first in the net has nothing to pass back */
            eps_pool_bwd(q, in, dy, rows, dx);
        if (!dx) break;
        spare = dx == p->d0 ? p->d1 : p->d0;
        dy = dx;
    }
}

EpsStatus EPS_FN(eps_net_loss_grad)(const EpsNet *net, const float *params,
                                    const float *x, int32_t batch, const int32_t *labels,
                                    float *grad, float *scratch, float *loss) {
    int32_t C = net->layers[net->n_layers - 1].n_out;
    uint32_t bad = 0;
    for (int32_t i = 0; i < batch; i++) bad |= (uint32_t)labels[i] >= (uint32_t)C;
    if (bad) return EpsErrValue;
    EpsNetPlan p;
    eps_net_layout(net, batch, scratch, &p);
    for (int32_t l = 0; l < p.L; l++) {
        const EpsGeo *q = &p.g[l];
        if (q->op == EpsOpConv)
            eps_transpose(params + q->w_off, p.WT[l], q->oc, q->ckk);
        else if (q->op == EpsOpDense)
            eps_transpose(params + q->w_off, p.WT[l], q->n_in, q->n_out);
        if (p.GT[l]) memset(p.GT[l], 0, sizeof(float) * (size_t)q->n_w);
    }
    memset(grad, 0, sizeof(float) * (size_t)p.n_params);
    float inv_batch = 1.0f / (float)batch;
    double total = 0.0;
    int32_t F = p.g[0].n_in;
    for (int32_t r0 = 0; r0 < batch; r0 += EPS_BATCH_CHUNK) {
        int32_t rows = batch - r0 < EPS_BATCH_CHUNK ? batch - r0 : EPS_BATCH_CHUNK;
        const float *xc = x + (int64_t)r0 * F;
        eps_net_fwd_chunk(&p, params, xc, rows);
        total += eps_softmax_rows(p.act[p.L - 1], rows, C, labels + r0, inv_batch);
        eps_net_bwd_chunk(&p, xc, rows, grad);
    }
    for (int32_t l = 0; l < p.L; l++) /* narrow dense: put W's gradient in place */
        if (p.GT[l]) eps_transpose(p.GT[l], grad + p.g[l].w_off, p.g[l].n_out, p.g[l].n_in);
    *loss = (float)(total / (double)batch);
    return EpsOk;
}

void EPS_FN(eps_net_forward)(const EpsNet *net, const float *params, const float *x,
                             int32_t batch, float *out, float *scratch) {
    EpsNetPlan p;
    eps_net_layout(net, batch, scratch, &p);
    for (int32_t l = 0; l < p.L; l++)
        if (p.GT[l]) eps_transpose(params + p.g[l].w_off, p.WT[l], p.g[l].n_in, p.g[l].n_out);
    int32_t F = p.g[0].n_in, C = p.g[p.L - 1].n_out;
    for (int32_t r0 = 0; r0 < batch; r0 += EPS_BATCH_CHUNK) {
        int32_t rows = batch - r0 < EPS_BATCH_CHUNK ? batch - r0 : EPS_BATCH_CHUNK;
        eps_net_fwd_chunk(&p, params, x + (int64_t)r0 * F, rows);
        float *o = out + (int64_t)r0 * C;
        memcpy(o, p.act[p.L - 1], sizeof(float) * (size_t)rows * (size_t)C);
        eps_softmax_rows(o, rows, C, NULL, 1.0f);
    }
}

void EPS_FN(eps_net_layer_forward)(const EpsNet *net, int32_t layer, const float *params,
                                   const float *in, int32_t batch, float *out,
                                   float *scratch) {
    EpsNetPlan p;
    eps_net_layout(net, batch, scratch, &p);
    const EpsGeo *q = &p.g[layer];
    if (p.GT[layer]) eps_transpose(params + q->w_off, p.WT[layer], q->n_in, q->n_out);
    for (int32_t r0 = 0; r0 < batch; r0 += EPS_BATCH_CHUNK) {
        int32_t rows = batch - r0 < EPS_BATCH_CHUNK ? batch - r0 : EPS_BATCH_CHUNK;
        const float *x = in + (int64_t)r0 * q->n_in;
        float *o = out + (int64_t)r0 * q->n_out;
        if (q->op == EpsOpConv)
            eps_conv_fwd(&p, q, params, x, rows, o);
        else if (q->op == EpsOpDense)
            eps_dense_fwd(&p, layer, params, x, rows, o);
        else
            eps_pool_fwd(q, x, rows, o);
    }
}

void EPS_FN(eps_net_layer_backward)(const EpsNet *net, int32_t layer, const float *params,
                                    const float *in, const float *out, float *dy,
                                    int32_t batch, float *grad, float *dx,
                                    float *scratch) {
    EpsNetPlan p;
    eps_net_layout(net, batch, scratch, &p);
    const EpsGeo *q = &p.g[layer];
    if (q->op == EpsOpConv)
        eps_transpose(params + q->w_off, p.WT[layer], q->oc, q->ckk);
    else if (q->op == EpsOpDense)
        eps_transpose(params + q->w_off, p.WT[layer], q->n_in, q->n_out);
    if (p.GT[layer]) memset(p.GT[layer], 0, sizeof(float) * (size_t)q->n_w);
    if (q->op == EpsOpConv || q->op == EpsOpDense)
        memset(grad + q->w_off, 0, sizeof(float) * (size_t)(q->n_w + q->oc));
    for (int32_t r0 = 0; r0 < batch; r0 += EPS_BATCH_CHUNK) {
        int32_t rows = batch - r0 < EPS_BATCH_CHUNK ? batch - r0 : EPS_BATCH_CHUNK;
        const float *x = in + (int64_t)r0 * q->n_in, *y = out + (int64_t)r0 * q->n_out;
        float *d = dy + (int64_t)r0 * q->n_out;
        float *dxc = dx ? dx + (int64_t)r0 * q->n_in : NULL;
        if (q->relu)
            for (int32_t i = 0; i < rows * q->n_out; i++) d[i] = y[i] > 0.0f ? d[i] : 0.0f;
        if (q->op == EpsOpConv)
            eps_conv_bwd(&p, q, layer, x, d, rows, grad, dxc);
        else if (q->op == EpsOpDense)
            eps_dense_bwd(&p, layer, x, d, rows, grad, dxc);
        else if (dxc)
            eps_pool_bwd(q, x, d, rows, dxc);
    }
    if (p.GT[layer]) eps_transpose(p.GT[layer], grad + q->w_off, q->n_out, q->n_in);
}
