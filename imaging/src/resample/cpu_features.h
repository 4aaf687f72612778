// Internal: which vector paths this build has, and whether the CPU running
// it can take them (checked once, at first use).
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TENSORCOM_HAVE_X86_SIMD_PATH 1
#endif

namespace tensorcom::imaging {

inline bool cpu_has_sse41() {
#ifdef TENSORCOM_HAVE_X86_SIMD_PATH
  static const bool sse41 = __builtin_cpu_supports("sse4.1");
  return sse41;
#else
  return false;
#endif
}

inline bool cpu_has_avx2() {
#ifdef TENSORCOM_HAVE_X86_SIMD_PATH
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2;
#else
  return false;
#endif
}

inline bool cpu_has_ssse3() {
#ifdef TENSORCOM_HAVE_X86_SIMD_PATH
  static const bool ssse3 = __builtin_cpu_supports("ssse3");
  return ssse3;
#else
  return false;
#endif
}

}  // namespace tensorcom::imaging
