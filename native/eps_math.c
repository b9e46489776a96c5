#include "eps_math.h"
#include "eps_math_inline.h"

float eps_expf(float x) { return eps_expf_inline(x); }

float eps_logf(float x) { return eps_logf_inline(x); }

float eps_tanhf(float x) { return eps_tanhf_inline(x); }

void eps_math_apply(int32_t op, const float *x, float *out, int32_t length) {
    for (int32_t i = 0; i < length; i++) {
        float v = x[i];
        switch (op) {
            case 0: out[i] = eps_expf_inline(v); break;
            case 1: out[i] = eps_logf_inline(v); break;
            case 2: out[i] = eps_tanhf_inline(v); break;
            default: out[i] = eps_log1pf_inline(v); break;
        }
    }
}
