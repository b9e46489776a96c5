/* libm-free float approximations (exp, log, log1p, tanh) of the kernels.
 *
 * Accuracy: max relative error of a few float ulps over the normal range (see
 * tests/native/test_math.py). The kernels use the inline forms in
 * eps_math_inline.h; these out-of-line ones are for tests and benchmarks.
 */
#ifndef EPS_MATH_H
#define EPS_MATH_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

float eps_expf(float x);
float eps_logf(float x);
float eps_tanhf(float x);
/* elementwise over arrays, for accuracy tests and benchmarks; op 0 exp, 1 log,
 * 2 tanh, 3 log1p */
void eps_math_apply(int32_t op, const float *x, float *out, int32_t length);

#ifdef __cplusplus
}
#endif
#endif
