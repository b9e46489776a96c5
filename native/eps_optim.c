#include "eps.h"
#include "eps_math_inline.h"

void EPS_FN(eps_sgd_step)(float *restrict params, const float *restrict grad, int32_t length,
                  float lr) {
    for (int32_t i = 0; i < length; i++) params[i] -= lr * grad[i];
}

void EPS_FN(eps_momentum_step)(float *restrict params, const float *restrict grad,
                       float *restrict velocity, int32_t length, float lr,
                       float momentum) {
    for (int32_t i = 0; i < length; i++) {
        float v = momentum * velocity[i] + grad[i];
        velocity[i] = v;
        params[i] -= lr * v;
    }
}

/* b^t for integer t >= 1, by squaring (no libm pow) */
static double eps_powi(double b, int32_t t) {
    double r = 1.0;
    while (t > 0) {
        if (t & 1) r *= b;
        b *= b;
        t >>= 1;
    }
    return r;
}

void EPS_FN(eps_adam_step)(float *restrict params, const float *restrict grad,
                   float *restrict m, float *restrict v, int32_t length, int32_t t,
                   float lr, float beta1, float beta2, float eps) {
    double c1 = 1.0 - eps_powi(beta1, t), c2 = 1.0 - eps_powi(beta2, t);
    /* bias corrections folded into the step size and eps scale */
    float step = (float)((double)lr / c1);
    float inv_sqrt_c2 = (float)(1.0 / (double)eps_sqrtf_inline((float)c2));
    float a1 = 1.0f - beta1, a2 = 1.0f - beta2;
    for (int32_t i = 0; i < length; i++) {
        float g = grad[i];
        float mi = beta1 * m[i] + a1 * g;
        float vi = beta2 * v[i] + a2 * (g * g);
        m[i] = mi;
        v[i] = vi;
        params[i] -= step * (mi / (eps_sqrtf_inline(vi) * inv_sqrt_c2 + eps));
    }
}
