/* cpu_bound: CPU-bound benchmark kernel (~0.3-0.5 s natively at -O1 with the
 * default scale 1.0).  argv[1] is an optional floating-point scale factor for
 * the amount of work (e.g. 0.01 for a quick emulated run); every phase runs
 * max(1, round(base * scale)) rounds.  Prints per-phase checksums and a total
 * checksum; the output depends only on the scale.  Exit status 0. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIEVE_N 200000
#define HASH_N 4096
#define MAT_N 48

static unsigned char composite[SIEVE_N + 1];
static uint64_t harr[HASH_N];
static double ma[MAT_N][MAT_N], mb[MAT_N][MAT_N], mc[MAT_N][MAT_N];

static long rounds_for(double base, double scale)
{
    double r = base * scale + 0.5;
    return r < 1.0 ? 1 : (long)r;
}

/* Phase 1: sieve of Eratosthenes, returns number of primes <= SIEVE_N. */
static uint64_t sieve(void)
{
    memset(composite, 0, sizeof composite);
    uint64_t count = 0;
    for (uint64_t i = 2; i <= SIEVE_N; i++) {
        if (composite[i])
            continue;
        count++;
        for (uint64_t j = i * i; j <= SIEVE_N; j += i)
            composite[j] = 1;
    }
    return count;
}

/* Phase 2: 64-bit mixing hash over an array, array updated each round. */
static uint64_t hash_round(uint64_t seed)
{
    uint64_t h = seed ^ 0xcbf29ce484222325ULL;
    for (int i = 0; i < HASH_N; i++) {
        uint64_t x = harr[i] ^ h;
        x ^= x >> 33;
        x *= 0xff51afd7ed558ccdULL;
        x ^= x >> 33;
        x *= 0xc4ceb9fe1a85ec53ULL;
        x ^= x >> 33;
        harr[i] = x;
        h = (h ^ x) * 0x100000001b3ULL;
    }
    return h;
}

/* Phase 3: dense double matrix multiply; returns a checksum of the result. */
static uint64_t matmul(int round)
{
    for (int i = 0; i < MAT_N; i++)
        for (int j = 0; j < MAT_N; j++) {
            ma[i][j] = (double)((i * 7 + j * 3 + round) % 17) / 8.0;
            mb[i][j] = (double)((i * 5 + j * 11 + 2 * round) % 13) / 4.0 - 1.0;
        }
    for (int i = 0; i < MAT_N; i++)
        for (int j = 0; j < MAT_N; j++) {
            double s = 0.0;
            for (int k = 0; k < MAT_N; k++)
                s += ma[i][k] * mb[k][j];
            mc[i][j] = s;
        }
    /* All inputs are multiples of 1/32 and sums are small: exact in double. */
    double total = 0.0;
    for (int i = 0; i < MAT_N; i++)
        for (int j = 0; j < MAT_N; j++)
            total += mc[i][j] * (double)((i + j) % 5 + 1);
    return (uint64_t)(int64_t)(total * 32.0);
}

int main(int argc, char **argv)
{
    double scale = argc > 1 ? strtod(argv[1], NULL) : 1.0;
    if (!(scale > 0.0))
        scale = 1.0;

    long r_sieve = rounds_for(100, scale);
    long r_hash = rounds_for(12000, scale);
    long r_mat = rounds_for(600, scale);

    uint64_t c_sieve = 0, c_hash = 0, c_mat = 0;

    for (long r = 0; r < r_sieve; r++)
        c_sieve = c_sieve * 31 + sieve();

    for (int i = 0; i < HASH_N; i++)
        harr[i] = (uint64_t)i * 0x9e3779b97f4a7c15ULL;
    for (long r = 0; r < r_hash; r++)
        c_hash ^= hash_round((uint64_t)r) + (uint64_t)r;

    for (long r = 0; r < r_mat; r++)
        c_mat = c_mat * 1000003 + matmul((int)r);

    printf("rounds: sieve %ld hash %ld matmul %ld\n", r_sieve, r_hash, r_mat);
    printf("sieve checksum: %016llx\n", (unsigned long long)c_sieve);
    printf("hash checksum: %016llx\n", (unsigned long long)c_hash);
    printf("matmul checksum: %016llx\n", (unsigned long long)c_mat);
    printf("checksum: %016llx\n", (unsigned long long)(c_sieve ^ (c_hash * 3) ^ (c_mat * 7)));
    return 0;
}
