/* The hot kernels compiled a second time with AVX2 and FMA enabled.
 *
 * Only on x86-64 with GCC or clang; eps_dispatch.c calls these when the CPU
 * (and OS) support them. A target pragma rather than a function attribute:
 * it also covers the inline helpers, so the whole hot path is compiled for
 * the wider vectors, exactly as with -mavx2 -mfma.
 */
#define EPS_VARIANT_AVX2 1
#include "eps_port.h"

#if defined(EPS_X86_DISPATCH)
#pragma GCC target("avx2,fma")
#include "eps_conv.c"
#include "eps_model.c"
#include "eps_optim.c"
#include "eps_update.c"
#else
/* ISO C forbids an empty translation unit */
typedef int eps_x86_avx2_unused;
#endif
