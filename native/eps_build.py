"""cffi (API mode) builder for the native kernels: `edgeps._native`.

Flags: -O3 -std=c99 with -fno-math-errno (sqrt becomes one instruction, no
errno) and -fno-trapping-math. Deliberately not -ffast-math: its
-ffinite-math-only lets the compiler drop NaN checks, and -fassociative-math
would fold the two-constant range reduction in eps_expf. Set
EDGEPS_NATIVE_MARCH (e.g. "native") to add -march=...; by default the build
stays portable and on x86-64 the hot kernels are built twice (baseline and
AVX2+FMA) with one picked at load time (see eps_port.h).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from cffi import FFI

HERE = Path(__file__).resolve().parent
SOURCES = [
    "eps.c",
    "eps_math.c",
    "eps_model.c",
    "eps_optim.c",
    "eps_update.c",
    "eps_x86_avx2.c",
    "eps_dispatch.c",
]

CDEF = """
typedef enum { EpsOk = 0, EpsErrLength, EpsErrValue, EpsStatusCount } EpsStatus;
const char *eps_status_str(EpsStatus status);
const char *eps_build_info(void);
const char *eps_dispatch_target(void);

float eps_expf(float x);
float eps_logf(float x);
float eps_tanhf(float x);
void eps_math_apply(int32_t op, const float *x, float *out, int32_t length);

typedef struct {
    int32_t kind;
    int32_t n_features;
    int32_t n_classes;
    int32_t n_hidden;
    int32_t hidden[2];
    int32_t activation;
} EpsModel;
EpsStatus eps_model_check(const EpsModel *model, int32_t params_length,
                          int32_t scratch_length, int32_t batch);
int32_t eps_model_n_params(const EpsModel *model);
int32_t eps_model_scratch_length(const EpsModel *model, int32_t batch);
EpsStatus eps_model_loss_grad(const EpsModel *model, const float *params,
                              const float *x, int32_t batch,
                              const int32_t *labels, const float *targets,
                              float *grad, float *scratch, float *loss);
void eps_model_forward(const EpsModel *model, const float *params,
                       const float *x, int32_t batch, float *out,
                       float *scratch);

void eps_sgd_step(float *params, const float *grad, int32_t length, float lr);
void eps_momentum_step(float *params, const float *grad, float *velocity,
                       int32_t length, float lr, float momentum);
void eps_adam_step(float *params, const float *grad, float *m, float *v,
                   int32_t length, int32_t t, float lr, float beta1, float beta2,
                   float eps);

float eps_l2_norm(const float *x, int32_t length);
void eps_scale(float *x, int32_t length, float scale);
int32_t eps_all_finite(const float *x, int32_t length);
void eps_fp16_quantize(const float *x, float *residual, uint16_t *out,
                       int32_t length);
void eps_fp16_dequantize(const uint16_t *q, float *out, int32_t length);
int32_t eps_int8_n_blocks(int32_t length, int32_t block);
EpsStatus eps_int8_check(int32_t length, int32_t block, int32_t q_length,
                         int32_t scales_length);
EpsStatus eps_int8_quantize(const float *x, float *residual, int8_t *q,
                            float *scales, int32_t length, int32_t block);
void eps_int8_dequantize(const int8_t *q, const float *scales, float *out,
                         int32_t length, int32_t block);
"""


def compile_args() -> list[str]:
    args = [
        "-O3",
        "-std=c99",
        "-fno-math-errno",
        "-fno-trapping-math",
        "-ffp-contract=fast",
    ]
    march = os.environ.get("EDGEPS_NATIVE_MARCH", "").strip()
    if march:
        # one target chosen by hand: no load-time dispatch needed
        args += ["-march=" + march, "-DEPS_NO_DISPATCH"]
    if sys.platform != "win32":
        args.append("-Wall")
    return args


def _c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


ffibuilder = FFI()
ffibuilder.cdef(CDEF)
ffibuilder.set_source(
    "edgeps._native",
    '#include "eps.h"',
    sources=[os.path.relpath(HERE / s) for s in SOURCES],
    include_dirs=[os.path.relpath(HERE)],
    extra_compile_args=compile_args(),
    define_macros=[("EPS_BUILD_FLAGS", _c_string(" ".join(compile_args())))],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
