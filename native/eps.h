/* edgeps native kernels: one header for the whole library.
 *
 * Portable C99, float32 throughout, no malloc: the caller owns every buffer.
 * Each family has a *_check() that validates sizes once; the hot functions
 * trust their arguments. Every header it includes also compiles alone, and
 * the cffi binding is generated from this one (native/eps_build.py), so a
 * prototype is written once, here or in a header listed below.
 */
#ifndef EPS_H
#define EPS_H
#include "eps_status.h"
#ifdef __cplusplus
extern "C" {
#endif

/* "key=value;..." describing compiler, flags, target ISA and dispatch of
 * this build */
const char *eps_build_info(void);
/* which instruction-set variant of the hot kernels this process runs:
 * "avx2+fma", "baseline", or "none" (a single build without dispatch) */
const char *eps_dispatch_target(void);

#ifdef __cplusplus
}
#endif

#include "eps_conv.h"
#include "eps_math.h"
#include "eps_model.h"
#include "eps_optim.h"
#include "eps_update.h"

#endif
