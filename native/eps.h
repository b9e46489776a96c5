/* edgeps native kernels: one header for the whole library.
 *
 * Portable C99, float32 throughout, no malloc: the caller owns every buffer.
 * Each family has a *_check() that validates sizes once; the hot functions
 * trust their arguments.
 */
#ifndef EPS_H
#define EPS_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    EpsOk = 0,
    EpsErrLength,
    EpsErrValue,
    EpsStatusCount
} EpsStatus;

const char *eps_status_str(EpsStatus status);

/* "key=value;..." describing compiler, flags and dispatch of this build */
const char *eps_build_info(void);
/* which instruction-set variant of the hot kernels this process runs:
 * "avx2+fma", "baseline", or "none" (a single build without dispatch) */
const char *eps_dispatch_target(void);

#ifdef __cplusplus
}
#endif

#include "eps_math.h"
#include "eps_model.h"
#include "eps_optim.h"
#include "eps_update.h"

#endif
