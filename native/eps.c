#include "eps.h"
#include "eps_port.h"

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

/* The instruction set the compiler targeted (the baseline one where x86-64
 * dispatch adds an AVX2+FMA copy). On ARM nothing is chosen at load time:
 * aarch64 always has NEON and GCC vectorizes the kernels with it at -O3;
 * on 32-bit ARM GCC keeps float math on the scalar VFP even with -mfpu=neon
 * (NEON there flushes subnormals; only -funsafe-math-optimizations lets it). */
#if defined(__aarch64__)
#define EPS_ISA "aarch64 neon"
#elif defined(__arm__) && defined(__ARM_NEON)
#define EPS_ISA "armv" EPS_STR(__ARM_ARCH) " vfp (neon present, not used for float)"
#elif defined(__arm__) && defined(__ARM_FP)
#define EPS_ISA "armv" EPS_STR(__ARM_ARCH) " vfp"
#elif defined(__arm__)
#define EPS_ISA "armv" EPS_STR(__ARM_ARCH) " soft-float"
#elif defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#define EPS_ISA "x86-64 avx2+fma"
#elif defined(__x86_64__)
#define EPS_ISA "x86-64 sse2"
#else
#define EPS_ISA "other"
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
    return "compiler=" EPS_COMPILER ";flags=" EPS_BUILD_FLAGS ";isa=" EPS_ISA
           ";dispatch=" EPS_DISPATCH_NAME ";batch_chunk=" EPS_STR(EPS_BATCH_CHUNK);
}
