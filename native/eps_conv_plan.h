/* The plan of a conv net (eps_conv.c): every layer's shapes and parameter
 * offsets, checked once, and where each buffer sits in the caller's scratch.
 *
 * Static functions in a header because eps_conv.c is compiled twice on x86-64
 * (baseline and AVX2, see eps_x86_avx2.c) and each copy needs its own.
 */
#ifndef EPS_CONV_PLAN_H
#define EPS_CONV_PLAN_H
#include <stdint.h>

#include "eps.h"

#ifndef EPS_CONV_COLS
#define EPS_CONV_COLS 512
#endif
/* dense layers this narrow use the transposed (dot-product) kernels */
#define EPS_NET_NARROW 16

/* One layer placed in the net: shapes per sample and parameter offsets. */
typedef struct {
    int32_t op, relu;
    int32_t ic, ih, iw, oc, oh, ow;
    int32_t kh, kw, sh, sw, ph, pw;
    int32_t n_in, n_out; /* floats per sample in and out */
    int32_t ckk;         /* conv: ic * kh * kw */
    int32_t sp;          /* conv: oh * ow */
    int32_t narrow;      /* dense: n_out < EPS_NET_NARROW */
    int64_t w_off, b_off, n_w;
} EpsGeo;

static int32_t eps_net_rows(int32_t batch) {
    return batch < EPS_BATCH_CHUNK ? batch : EPS_BATCH_CHUNK;
}

/* samples per im2col group for a conv with `sp` output positions */
static int32_t eps_net_group(int32_t sp, int32_t rows) {
    int32_t g = EPS_CONV_COLS / sp;
    if (g < 1) g = 1;
    return g < rows ? g : rows;
}

static int eps_net_dim_ok(int64_t d) { return d >= 1 && d <= EPS_MAX_DIM; }

/* Shapes and offsets of every layer; the number of layers, or 0 if invalid. */
static int32_t eps_net_geo(const EpsNet *net, EpsGeo *g, int64_t *n_params) {
    if (!net || (net->dims != 1 && net->dims != 2)) return 0;
    int32_t L = net->n_layers;
    if (L < 1 || L > EPS_NET_MAX_LAYERS) return 0;
    int two = net->dims == 2;
    int64_t c = net->in_shape[0], h = two ? net->in_shape[1] : 1;
    int64_t w = two ? net->in_shape[2] : net->in_shape[1];
    if (!eps_net_dim_ok(c) || !eps_net_dim_ok(h) || !eps_net_dim_ok(w)) return 0;
    int flat = 0; /* after a dense layer, only dense layers follow */
    int64_t off = 0;
    for (int32_t l = 0; l < L; l++) {
        const EpsLayer *ly = &net->layers[l];
        EpsGeo *q = &g[l];
        int64_t n_in = c * h * w;
        if (n_in > EPS_MAX_DIM) return 0;
        q->op = ly->op;
        q->relu = ly->relu;
        q->ic = (int32_t)c;
        q->ih = (int32_t)h;
        q->iw = (int32_t)w;
        q->n_in = (int32_t)n_in;
        q->ckk = q->sp = q->narrow = 0;
        q->kh = q->kw = q->sh = q->sw = 1;
        q->ph = q->pw = 0;
        if (ly->relu != 0 && ly->relu != 1) return 0;
        if (ly->op == EpsOpDense) {
            if (!eps_net_dim_ok(ly->n_out)) return 0;
            if (ly->k != 1 || ly->stride != 1 || ly->pad != 0) return 0;
            flat = 1;
            c = ly->n_out;
            h = w = 1;
            q->n_w = n_in * ly->n_out;
            q->narrow = ly->n_out < EPS_NET_NARROW;
        } else if (ly->op >= EpsOpConv && ly->op <= EpsOpAvgPool) {
            int conv = ly->op == EpsOpConv;
            if (flat || !eps_net_dim_ok(ly->k) || !eps_net_dim_ok(ly->stride)) return 0;
            if (ly->pad < 0 || ly->pad >= ly->k || (!conv && ly->pad != 0)) return 0;
            if (conv ? !eps_net_dim_ok(ly->n_out) || !ly->relu : ly->n_out || ly->relu)
                return 0;
            q->kw = ly->k;
            q->sw = ly->stride;
            q->pw = ly->pad;
            if (two) {
                q->kh = ly->k;
                q->sh = ly->stride;
                q->ph = ly->pad;
            }
            int64_t spanh = h + 2 * q->ph - q->kh, spanw = w + 2 * q->pw - q->kw;
            if (spanh < 0 || spanw < 0) return 0;
            h = spanh / q->sh + 1;
            w = spanw / q->sw + 1;
            c = conv ? ly->n_out : c;
            q->ckk = conv ? (int32_t)(q->ic * (int64_t)q->kh * q->kw) : 0;
            q->n_w = conv ? (int64_t)ly->n_out * q->ckk : 0;
            if (q->ckk > EPS_MAX_DIM) return 0;
        } else {
            return 0;
        }
        int64_t n_out = c * h * w;
        if (n_out > EPS_MAX_DIM) return 0;
        q->oc = (int32_t)c;
        q->oh = (int32_t)h;
        q->ow = (int32_t)w;
        q->n_out = (int32_t)n_out;
        q->sp = (int32_t)(h * w);
        q->w_off = off;
        q->b_off = off + q->n_w;
        off += q->n_w + (ly->op == EpsOpConv || ly->op == EpsOpDense ? c : 0);
    }
    const EpsLayer *last = &net->layers[L - 1];
    if (last->op != EpsOpDense || last->relu || last->n_out < 2) return 0;
    *n_params = off;
    return L;
}

/* Pointers into the caller's scratch (the layout eps_net_scratch64 counts). */
typedef struct {
    int32_t L, rows, widest;
    EpsGeo g[EPS_NET_MAX_LAYERS];
    float *WT[EPS_NET_MAX_LAYERS], *GT[EPS_NET_MAX_LAYERS], *act[EPS_NET_MAX_LAYERS];
    float *gtmp, *cols, *ybuf, *d0, *d1;
    int64_t n_params, total;
} EpsNetPlan;

/* Fills the plan's sizes; with scratch, its pointers too. Returns the floats
 * of scratch needed, or -1 for an invalid net or batch. */
static int64_t eps_net_layout(const EpsNet *net, int32_t batch, float *scratch,
                              EpsNetPlan *p) {
    if (batch < 1) return -1;
    p->L = eps_net_geo(net, p->g, &p->n_params);
    if (p->L == 0) return -1;
    int64_t rows = eps_net_rows(batch), off = 0, gtmp = 0, cols = 0, ybuf = 0;
    int64_t widest = 0;
    p->rows = (int32_t)rows;
    for (int32_t l = 0; l < p->L; l++) {
        const EpsGeo *q = &p->g[l];
        p->WT[l] = p->GT[l] = NULL;
        if (q->op == EpsOpConv || q->op == EpsOpDense) {
            if (scratch) p->WT[l] = scratch + off;
            off += q->n_w;
        }
        if (q->narrow) {
            if (scratch) p->GT[l] = scratch + off;
            off += q->n_w;
        }
        if (q->op == EpsOpConv) {
            int64_t gs = (int64_t)eps_net_group(q->sp, (int32_t)rows) * q->sp;
            if (q->n_w > gtmp) gtmp = q->n_w;
            if (q->ckk * gs > cols) cols = q->ckk * gs;
            if (q->oc * gs > ybuf) ybuf = q->oc * gs;
        }
        if (q->n_out > widest) widest = q->n_out;
        if (l > 0 && q->n_in > widest) widest = q->n_in;
    }
    for (int32_t l = 0; l < p->L; l++) {
        if (scratch) p->act[l] = scratch + off;
        off += rows * p->g[l].n_out;
    }
    int64_t parts[5] = {gtmp, cols, ybuf, rows * widest, rows * widest};
    float **dst[5] = {&p->gtmp, &p->cols, &p->ybuf, &p->d0, &p->d1};
    for (int i = 0; i < 5; i++) {
        if (scratch) *dst[i] = scratch + off;
        off += parts[i];
    }
    p->widest = (int32_t)widest;
    p->total = off;
    return off > INT32_MAX ? -1 : off;
}

#endif /* EPS_CONV_PLAN_H */
