/* Runs the native kernels on inputs from stdin, for builds that cffi cannot
 * load: tests/native/test_cross.py cross-compiles it with native/ for the
 * Raspberry Pi's ISAs, runs it under qemu-user and compares the replies with
 * the numpy reference.
 *
 * usage: eps_driver info | model | net | optim | update | math
 *
 * Requests and replies are little-endian int32 / float32 / int8 / uint16
 * arrays, laid out per command below (the test writes and reads the same
 * layouts). Exit status 2 on a malformed request.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eps.h"

static void die(const char *why) {
    fprintf(stderr, "eps_driver: %s\n", why);
    exit(2);
}

static void *take(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) die("out of memory");
    if (fread(p, 1, n, stdin) != n) die("short request");
    return p;
}

static void *alloc(size_t n) {
    void *p = calloc(n ? n : 1, 1);
    if (!p) die("out of memory");
    return p;
}

static int32_t take_i32(void) {
    int32_t v;
    if (fread(&v, sizeof v, 1, stdin) != 1) die("short request");
    return v;
}

static float take_f32(void) {
    float v;
    if (fread(&v, sizeof v, 1, stdin) != 1) die("short request");
    return v;
}

static void give(const void *p, size_t n) {
    if (fwrite(p, 1, n, stdout) != n) die("short write");
}

static float *copy_f32(const float *x, int32_t n) {
    float *y = alloc((size_t)n * sizeof *y);
    memcpy(y, x, (size_t)n * sizeof *y);
    return y;
}

static int32_t take_length(void) {
    int32_t n = take_i32();
    if (n < 0 || n > (1 << 24)) die("bad length");
    return n;
}

/* model: i32 kind, n_features, n_classes, n_hidden, hidden[2], activation,
 * batch; f32 params[n_params]; f32 x[batch * n_features]; then f32
 * targets[batch] (linear) or i32 labels[batch].
 * reply: i32 status; f32 loss; f32 grad[n_params]; f32 out[batch * n_out] */
static void run_model(void) {
    EpsModel m;
    m.kind = take_i32();
    m.n_features = take_i32();
    m.n_classes = take_i32();
    m.n_hidden = take_i32();
    m.hidden[0] = take_i32();
    m.hidden[1] = take_i32();
    m.activation = take_i32();
    int32_t batch = take_length();
    int32_t n_params = eps_model_n_params(&m);
    if (n_params < 0 || batch < 1) die("invalid model or batch");
    int32_t n_out = m.kind == EpsSoftmax || m.kind == EpsMlp ? m.n_classes : 1;
    float *params = take((size_t)n_params * sizeof(float));
    float *x = take((size_t)batch * (size_t)m.n_features * sizeof(float));
    float *targets = NULL;
    int32_t *labels = NULL;
    if (m.kind == EpsLinear)
        targets = take((size_t)batch * sizeof(float));
    else
        labels = take((size_t)batch * sizeof(int32_t));
    int32_t n_scratch = eps_model_scratch_length(&m, batch);
    float *scratch = alloc((size_t)n_scratch * sizeof(float));
    float *grad = alloc((size_t)n_params * sizeof(float));
    float *out = alloc((size_t)batch * (size_t)n_out * sizeof(float));
    float loss = 0.0f;
    int32_t status = eps_model_check(&m, n_params, n_scratch, batch);
    if (status == EpsOk) {
        status = eps_model_loss_grad(&m, params, x, batch, labels, targets, grad,
                                     scratch, &loss);
        eps_model_forward(&m, params, x, batch, out, scratch);
    }
    give(&status, sizeof status);
    give(&loss, sizeof loss);
    give(grad, (size_t)n_params * sizeof(float));
    give(out, (size_t)batch * (size_t)n_out * sizeof(float));
}

/* net: i32 dims, in_shape[3], n_layers, then per layer i32 op, n_out, k,
 * stride, pad, relu; i32 batch; f32 params[n_params]; f32 x[batch * n_in];
 * i32 labels[batch].
 * reply: i32 status; f32 loss; f32 grad[n_params]; f32 out[batch * classes] */
static void run_net(void) {
    EpsNet net;
    memset(&net, 0, sizeof net);
    net.dims = take_i32();
    for (int i = 0; i < 3; i++) net.in_shape[i] = take_i32();
    net.n_layers = take_i32();
    if (net.n_layers < 1 || net.n_layers > EPS_NET_MAX_LAYERS) die("bad layer count");
    for (int32_t l = 0; l < net.n_layers; l++) {
        EpsLayer *ly = &net.layers[l];
        ly->op = take_i32();
        ly->n_out = take_i32();
        ly->k = take_i32();
        ly->stride = take_i32();
        ly->pad = take_i32();
        ly->relu = take_i32();
    }
    int32_t batch = take_length();
    int32_t n_params = eps_net_n_params(&net), n_classes = eps_net_n_classes(&net);
    if (n_params < 0 || batch < 1) die("invalid net or batch");
    int32_t n_in = net.in_shape[0] * net.in_shape[1] * (net.dims == 2 ? net.in_shape[2] : 1);
    float *params = take((size_t)n_params * sizeof(float));
    float *x = take((size_t)batch * (size_t)n_in * sizeof(float));
    int32_t *labels = take((size_t)batch * sizeof(int32_t));
    int32_t n_scratch = eps_net_scratch_length(&net, batch);
    float *scratch = alloc((size_t)n_scratch * sizeof(float));
    float *grad = alloc((size_t)n_params * sizeof(float));
    float *out = alloc((size_t)batch * (size_t)n_classes * sizeof(float));
    float loss = 0.0f;
    int32_t status = eps_net_check(&net, n_params, n_scratch, batch);
    if (status == EpsOk) {
        status = eps_net_loss_grad(&net, params, x, batch, labels, grad, scratch, &loss);
        eps_net_forward(&net, params, x, batch, out, scratch);
    }
    give(&status, sizeof status);
    give(&loss, sizeof loss);
    give(grad, (size_t)n_params * sizeof(float));
    give(out, (size_t)batch * (size_t)n_classes * sizeof(float));
}

/* optim: i32 length, t; f32 lr, momentum, beta1, beta2, eps; f32 params,
 * grad, velocity, m, v [length] each.
 * reply: f32 [length] each: sgd params; momentum params, velocity; adam
 * params, m, v (every step starts from the request's arrays) */
static void run_optim(void) {
    int32_t n = take_length(), t = take_i32();
    float lr = take_f32(), mu = take_f32();
    float b1 = take_f32(), b2 = take_f32(), eps = take_f32();
    size_t bytes = (size_t)n * sizeof(float);
    float *p = take(bytes), *g = take(bytes), *vel = take(bytes);
    float *m = take(bytes), *v = take(bytes);
    float *p_sgd = copy_f32(p, n);
    eps_sgd_step(p_sgd, g, n, lr);
    float *p_mom = copy_f32(p, n);
    eps_momentum_step(p_mom, g, vel, n, lr, mu);
    eps_adam_step(p, g, m, v, n, t, lr, b1, b2, eps);
    give(p_sgd, bytes);
    give(p_mom, bytes);
    give(vel, bytes);
    give(p, bytes);
    give(m, bytes);
    give(v, bytes);
}

/* update: i32 length, block; f32 scale; f32 x[length], residual[length].
 * reply: f32 l2_norm; i32 all_finite; f32 scaled x[length];
 *        u16 fp16 q[length]; f32 fp16 dequantized[length];
 *        u16 fp16 q with residual[length]; f32 residual after[length];
 *        i32 int8 status; i8 q[length]; f32 scales[n_blocks];
 *        f32 int8 dequantized[length];
 *        i8 q with residual[length]; f32 scales[n_blocks]; f32 residual after */
static void run_update(void) {
    int32_t n = take_length(), block = take_i32();
    float scale = take_f32();
    size_t bytes = (size_t)n * sizeof(float);
    float *x = take(bytes), *residual = take(bytes);
    int32_t nb = eps_int8_n_blocks(n, block);
    if (eps_int8_check(n, block, n, nb) != EpsOk) die("bad int8 block");
    float norm = eps_l2_norm(x, n);
    int32_t finite = eps_all_finite(x, n);
    float *scaled = copy_f32(x, n);
    eps_scale(scaled, n, scale);
    give(&norm, sizeof norm);
    give(&finite, sizeof finite);
    give(scaled, bytes);

    uint16_t *h = alloc((size_t)n * sizeof *h);
    float *back = alloc(bytes);
    eps_fp16_quantize(x, NULL, h, n);
    eps_fp16_dequantize(h, back, n);
    give(h, (size_t)n * sizeof *h);
    give(back, bytes);
    float *res_h = copy_f32(residual, n);
    eps_fp16_quantize(x, res_h, h, n);
    give(h, (size_t)n * sizeof *h);
    give(res_h, bytes);

    int8_t *q = alloc((size_t)n);
    float *scales = alloc((size_t)nb * sizeof(float));
    int32_t status = eps_int8_quantize(x, NULL, q, scales, n, block);
    eps_int8_dequantize(q, scales, back, n, block);
    give(&status, sizeof status);
    give(q, (size_t)n);
    give(scales, (size_t)nb * sizeof(float));
    give(back, bytes);
    float *res_q = copy_f32(residual, n);
    eps_int8_quantize(x, res_q, q, scales, n, block);
    give(q, (size_t)n);
    give(scales, (size_t)nb * sizeof(float));
    give(res_q, bytes);
}

/* math: i32 op (0 exp, 1 log, 2 tanh, 3 log1p), length; f32 x[length].
 * reply: f32 out[length] */
static void run_math(void) {
    int32_t op = take_i32(), n = take_length();
    float *x = take((size_t)n * sizeof(float));
    float *out = alloc((size_t)n * sizeof(float));
    eps_math_apply(op, x, out, n);
    give(out, (size_t)n * sizeof(float));
}

int main(int argc, char **argv) {
    if (argc != 2) die("usage: eps_driver info|model|net|optim|update|math");
    const char *cmd = argv[1];
    if (strcmp(cmd, "info") == 0)
        printf("%s;running=%s\n", eps_build_info(), eps_dispatch_target());
    else if (strcmp(cmd, "model") == 0)
        run_model();
    else if (strcmp(cmd, "net") == 0)
        run_net();
    else if (strcmp(cmd, "optim") == 0)
        run_optim();
    else if (strcmp(cmd, "update") == 0)
        run_update();
    else if (strcmp(cmd, "math") == 0)
        run_math();
    else
        die("unknown command");
    return fflush(stdout) == 0 ? 0 : 2;
}
