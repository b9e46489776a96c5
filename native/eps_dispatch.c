/* Public entry points of the hot kernels on x86-64: one branch picks the
 * AVX2+FMA build or the baseline build, decided once at load time.
 * EDGEPS_NATIVE_BASELINE=1 in the environment forces the baseline (to
 * measure what a machine without AVX2 gets). */
#include <stdlib.h>

#include "eps.h"
#include "eps_port.h"

#if defined(EPS_X86_DISPATCH)

#define EPS_VARIANTS(ret, name, params)  \
    ret name##_avx2 params;              \
    ret name##_baseline params;

EPS_VARIANTS(EpsStatus, eps_model_loss_grad,
             (const EpsModel *, const float *, const float *, int32_t,
              const int32_t *, const float *, float *, float *, float *))
EPS_VARIANTS(void, eps_model_forward,
             (const EpsModel *, const float *, const float *, int32_t, float *,
              float *))
EPS_VARIANTS(EpsStatus, eps_net_loss_grad,
             (const EpsNet *, const float *, const float *, int32_t, const int32_t *,
              float *, float *, float *))
EPS_VARIANTS(void, eps_net_forward,
             (const EpsNet *, const float *, const float *, int32_t, float *, float *))
EPS_VARIANTS(void, eps_net_layer_forward,
             (const EpsNet *, int32_t, const float *, const float *, int32_t, float *,
              float *))
EPS_VARIANTS(void, eps_net_layer_backward,
             (const EpsNet *, int32_t, const float *, const float *, const float *,
              float *, int32_t, float *, float *, float *))
EPS_VARIANTS(void, eps_sgd_step, (float *, const float *, int32_t, float))
EPS_VARIANTS(void, eps_momentum_step,
             (float *, const float *, float *, int32_t, float, float))
EPS_VARIANTS(void, eps_adam_step,
             (float *, const float *, float *, float *, int32_t, int32_t, float,
              float, float, float))
EPS_VARIANTS(float, eps_l2_norm, (const float *, int32_t))
EPS_VARIANTS(void, eps_scale, (float *, int32_t, float))
EPS_VARIANTS(int32_t, eps_all_finite, (const float *, int32_t))
EPS_VARIANTS(void, eps_fp16_quantize, (const float *, float *, uint16_t *, int32_t))
EPS_VARIANTS(void, eps_fp16_dequantize, (const uint16_t *, float *, int32_t))
EPS_VARIANTS(EpsStatus, eps_int8_quantize,
             (const float *, float *, int8_t *, float *, int32_t, int32_t))
EPS_VARIANTS(void, eps_int8_dequantize,
             (const int8_t *, const float *, float *, int32_t, int32_t))

static int eps_avx2 = 0;

__attribute__((constructor)) static void eps_detect_cpu(void) {
    const char *force = getenv("EDGEPS_NATIVE_BASELINE");
    __builtin_cpu_init();
    eps_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (force && *force && *force != '0') eps_avx2 = 0;
}

const char *eps_dispatch_target(void) { return eps_avx2 ? "avx2+fma" : "baseline"; }

#define EPS_PICK(name) (eps_avx2 ? name##_avx2 : name##_baseline)

EpsStatus eps_model_loss_grad(const EpsModel *m, const float *params, const float *x,
                              int32_t batch, const int32_t *labels,
                              const float *targets, float *grad, float *scratch,
                              float *loss) {
    return EPS_PICK(eps_model_loss_grad)(m, params, x, batch, labels, targets, grad,
                                         scratch, loss);
}

void eps_model_forward(const EpsModel *m, const float *params, const float *x,
                       int32_t batch, float *out, float *scratch) {
    EPS_PICK(eps_model_forward)(m, params, x, batch, out, scratch);
}

EpsStatus eps_net_loss_grad(const EpsNet *net, const float *params, const float *x,
                            int32_t batch, const int32_t *labels, float *grad,
                            float *scratch, float *loss) {
    return EPS_PICK(eps_net_loss_grad)(net, params, x, batch, labels, grad, scratch,
                                       loss);
}

void eps_net_forward(const EpsNet *net, const float *params, const float *x,
                     int32_t batch, float *out, float *scratch) {
    EPS_PICK(eps_net_forward)(net, params, x, batch, out, scratch);
}

void eps_net_layer_forward(const EpsNet *net, int32_t layer, const float *params,
                           const float *in, int32_t batch, float *out, float *scratch) {
    EPS_PICK(eps_net_layer_forward)(net, layer, params, in, batch, out, scratch);
}

void eps_net_layer_backward(const EpsNet *net, int32_t layer, const float *params,
                            const float *in, const float *out, float *dy,
                            int32_t batch, float *grad, float *dx, float *scratch) {
    EPS_PICK(eps_net_layer_backward)(net, layer, params, in, out, dy, batch, grad, dx,
                                     scratch);
}

void eps_sgd_step(float *params, const float *grad, int32_t length, float lr) {
    EPS_PICK(eps_sgd_step)(params, grad, length, lr);
}

void eps_momentum_step(float *params, const float *grad, float *velocity,
                       int32_t length, float lr, float momentum) {
    EPS_PICK(eps_momentum_step)(params, grad, velocity, length, lr, momentum);
}

void eps_adam_step(float *params, const float *grad, float *m, float *v,
                   int32_t length, int32_t t, float lr, float beta1, float beta2,
                   float eps) {
    EPS_PICK(eps_adam_step)(params, grad, m, v, length, t, lr, beta1, beta2, eps);
}

float eps_l2_norm(const float *x, int32_t length) {
    return EPS_PICK(eps_l2_norm)(x, length);
}

void eps_scale(float *x, int32_t length, float scale) {
    EPS_PICK(eps_scale)(x, length, scale);
}

int32_t eps_all_finite(const float *x, int32_t length) {
    return EPS_PICK(eps_all_finite)(x, length);
}

void eps_fp16_quantize(const float *x, float *residual, uint16_t *out,
                       int32_t length) {
    EPS_PICK(eps_fp16_quantize)(x, residual, out, length);
}

void eps_fp16_dequantize(const uint16_t *q, float *out, int32_t length) {
    EPS_PICK(eps_fp16_dequantize)(q, out, length);
}

EpsStatus eps_int8_quantize(const float *x, float *residual, int8_t *q,
                            float *scales, int32_t length, int32_t block) {
    return EPS_PICK(eps_int8_quantize)(x, residual, q, scales, length, block);
}

void eps_int8_dequantize(const int8_t *q, const float *scales, float *out,
                         int32_t length, int32_t block) {
    EPS_PICK(eps_int8_dequantize)(q, scales, out, length, block);
}

#else

const char *eps_dispatch_target(void) { return "none"; }

#endif
