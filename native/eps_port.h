/* Portability macros: restrict, forced inlining, x86-64 instruction-set variants.
 *
 * On x86-64 with GCC or clang the hot kernels are compiled twice: once for
 * the baseline (SSE2) and once, in eps_x86_avx2.c, with AVX2 and FMA enabled
 * by a target pragma. eps_dispatch.c picks one per process from the CPU's
 * features, so a distributed build stays portable yet fast. EPS_FN(name)
 * gives each hot kernel its per-variant name. Define EPS_NO_DISPATCH (done
 * when a -march is chosen) or EPS_PORTABLE, or build for any other target,
 * to get one plain set of functions, named as in the headers (what a
 * microcontroller build, or a copy of a few sources into a project, links).
 */
#ifndef EPS_PORT_H
#define EPS_PORT_H

#if defined(__GNUC__)
#define EPS_INLINE static inline __attribute__((always_inline))
#define EPS_MAYBE_UNUSED __attribute__((unused))
#else
#define EPS_INLINE static inline
#define EPS_MAYBE_UNUSED
#endif

/* EPS_NO_CONTRACT (before a function) and EPS_NO_CONTRACT_BODY (first line
 * of its body): no fused multiply-add there, because the result must match
 * another implementation bit for bit (int8 rounding against numpy) */
#if defined(__clang__)
#define EPS_NO_CONTRACT
#define EPS_NO_CONTRACT_BODY _Pragma("clang fp contract(off)")
#elif defined(__GNUC__)
#define EPS_NO_CONTRACT __attribute__((optimize("fp-contract=off")))
#define EPS_NO_CONTRACT_BODY
#else
#define EPS_NO_CONTRACT
#define EPS_NO_CONTRACT_BODY
#endif

#if defined(__GNUC__) && defined(__x86_64__) && !defined(EPS_NO_DISPATCH) && \
    !defined(EPS_PORTABLE)
#define EPS_X86_DISPATCH 1
#define EPS_DISPATCH_NAME "x86-64 avx2+fma|baseline"
#else
#define EPS_DISPATCH_NAME "none"
#endif

#if defined(EPS_VARIANT_AVX2)
#define EPS_FN(name) name##_avx2
#elif defined(EPS_X86_DISPATCH)
#define EPS_FN(name) name##_baseline
#else
#define EPS_FN(name) name
#endif

#endif
