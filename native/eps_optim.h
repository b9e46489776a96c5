/* Optimizer steps on one flat float32 vector; all state in caller buffers. */
#ifndef EPS_OPTIM_H
#define EPS_OPTIM_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

/* params -= lr * grad */
void eps_sgd_step(float *params, const float *grad, int32_t length, float lr);

/* velocity = momentum * velocity + grad; params -= lr * velocity */
void eps_momentum_step(float *params, const float *grad, float *velocity,
                       int32_t length, float lr, float momentum);

/* Adam (Kingma & Ba) with bias correction; t counts steps from 1; m and v
 * hold the first and second moments */
void eps_adam_step(float *params, const float *grad, float *m, float *v,
                   int32_t length, int32_t t, float lr, float beta1, float beta2,
                   float eps);

#ifdef __cplusplus
}
#endif
#endif
