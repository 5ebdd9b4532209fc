/* cpu_probe: what the guest learns of its CPU: CPUID features (the persistence instructions
 * present, RDRAND/RDSEED/AVX hidden), RDTSC advancing, and RDRAND executed anyway (emulated
 * from the seed under ferrite). Output differs natively (another CPU); under ferrite it is a
 * function of the seed. Exits 0. */
#include <cpuid.h>
#include <stdint.h>
#include <stdio.h>
#include <x86intrin.h>

int main(void)
{
    unsigned a, b, c, d;
    __cpuid_count(1, 0, a, b, c, d);
    int rdrand = (c >> 30) & 1, avx = (c >> 28) & 1, sse42 = (c >> 20) & 1;
    __cpuid_count(7, 0, a, b, c, d);
    int clwb = (b >> 24) & 1, clflushopt = (b >> 23) & 1, rdseed = (b >> 18) & 1;
    printf("clwb %d clflushopt %d sse4.2 %d avx %d rdrand %d rdseed %d\n", clwb, clflushopt, sse42, avx, rdrand, rdseed);
    uint64_t t0 = __rdtsc(), t1 = __rdtsc();
    printf("rdtsc advances: %s\n", t1 > t0 ? "yes" : "no");
    unsigned long long r = 0;
    int ok = __builtin_ia32_rdrand64_step(&r);
    printf("rdrand ok %d value %016llx\n", ok, r);
    return 0;
}
