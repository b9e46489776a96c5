/* Portability macros: restrict, forced inlining, optional x86-64 multiversioning.
 *
 * EPS_DISPATCH marks the exported hot kernels. On x86-64 Linux with GCC or
 * clang it compiles each of them twice (baseline x86-64 and x86-64-v3 with
 * AVX2/FMA) and picks one at load time, so a distributed build stays
 * portable yet fast. Define EPS_NO_DISPATCH (done when a -march is chosen)
 * or build for any other target to get plain functions.
 */
#ifndef EPS_PORT_H
#define EPS_PORT_H

#if defined(__GNUC__)
#define EPS_INLINE static inline __attribute__((always_inline))
#else
#define EPS_INLINE static inline
#endif

#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(EPS_NO_DISPATCH)
#define EPS_DISPATCH __attribute__((target_clones("arch=x86-64-v3", "default")))
#define EPS_DISPATCH_NAME "x86-64-v3|default"
#else
#define EPS_DISPATCH
#define EPS_DISPATCH_NAME "none"
#endif

#endif
