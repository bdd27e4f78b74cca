/* Run-time CPU feature detection for the kernel dispatch: cpuid/xgetbv on
 * x86-64 (an instruction set counts only if the OS also saves its register
 * state), getauxval(AT_HWCAP) on aarch64. Owns nothing; fills a plain struct. */
#include "kernels.h"

#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>

/* XCR0: which register states the OS saves on context switch. */
static uint64_t cpu_read_xcr0(void)
{
    uint32_t low, high;
    __asm__ volatile("xgetbv" : "=a"(low), "=d"(high) : "c"(0));
    return ((uint64_t)high << 32) | low;
}

void cpu_features_detect(cpu_features *features)
{
    memset(features, 0, sizeof *features);
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx))
        return;
    int has_osxsave = (ecx >> 27) & 1;
    int has_avx = (ecx >> 28) & 1;
    int has_fma = (ecx >> 12) & 1;
    int has_f16c = (ecx >> 29) & 1;
    if (!has_osxsave || !has_avx)
        return;
    uint64_t xcr0 = cpu_read_xcr0();
    /* Bits 1-2: SSE and AVX (ymm) state; bits 5-7: opmask and zmm state. */
    int os_ymm = (xcr0 & 0x6) == 0x6;
    int os_zmm = os_ymm && (xcr0 & 0xe0) == 0xe0;
    if (!os_ymm)
        return;
    features->fma = has_fma;
    features->f16c = has_f16c;

    unsigned int max_leaf = __get_cpuid_max(0, NULL);
    if (max_leaf < 7)
        return;
    __cpuid_count(7, 0, eax, ebx, ecx, edx);
    features->avx2 = (ebx >> 5) & 1;
    if (os_zmm) {
        features->avx512f = (ebx >> 16) & 1;
        features->avx512bw = (ebx >> 30) & 1;
        features->avx512vl = (ebx >> 31) & 1;
        features->avx512vnni = (ecx >> 11) & 1;
    }
    unsigned int subleaf_max = eax;
    if (subleaf_max >= 1) {
        __cpuid_count(7, 1, eax, ebx, ecx, edx);
        features->avxvnni = (eax >> 4) & 1;
        if (os_zmm)
            features->avx512bf16 = (eax >> 5) & 1;
    }
}

#elif defined(__aarch64__)
#include <sys/auxv.h>

#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1UL << 1)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif

void cpu_features_detect(cpu_features *features)
{
    memset(features, 0, sizeof *features);
    unsigned long hwcap = getauxval(AT_HWCAP);
    features->neon = (hwcap & HWCAP_ASIMD) != 0;
    features->neon_dotprod = features->neon && (hwcap & HWCAP_ASIMDDP) != 0;
}

#else

void cpu_features_detect(cpu_features *features)
{
    memset(features, 0, sizeof *features);
}

#endif
