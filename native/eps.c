#include "eps.h"

#ifndef EPS_BUILD_FLAGS
#define EPS_BUILD_FLAGS "unknown"
#endif

#define EPS_STR2(x) #x
#define EPS_STR(x) EPS_STR2(x)

#if defined(__clang__)
#define EPS_COMPILER "clang " __clang_version__
#elif defined(__GNUC__)
#define EPS_COMPILER "gcc " EPS_STR(__GNUC__) "." EPS_STR(__GNUC_MINOR__) "." \
    EPS_STR(__GNUC_PATCHLEVEL__)
#else
#define EPS_COMPILER "unknown"
#endif

static const char *const eps_status_strings[EpsStatusCount] = {
    [EpsOk] = "ok",
    [EpsErrLength] = "buffer length mismatch",
    [EpsErrValue] = "invalid value",
};

const char *eps_status_str(EpsStatus status) {
    if ((int)status < 0 || status >= EpsStatusCount) return "unknown status";
    return eps_status_strings[status];
}

const char *eps_build_info(void) {
    return "compiler=" EPS_COMPILER ";flags=" EPS_BUILD_FLAGS
           ";dispatch=" EPS_DISPATCH_NAME ";batch_chunk=" EPS_STR(EPS_BATCH_CHUNK);
}
