/* thr_cpu_bound: cpu_bound's three kernels (sieve, mixing hash, matrix multiply) run by N threads
 * at once, each on its own heap state, for measuring the per-access passes (hmtrace, oscs) on
 * multi-threaded CPU-bound code, where every load and store is watched.
 * Usage: thr_cpu_bound [SCALE [THREADS]] (defaults 1.0 and 4). Race-free: a thread touches only
 * its own block until main joins it and reads its checksum. The output depends only on the
 * arguments. Exit status 0. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIEVE_N 50000
#define HASH_N 1024
#define MAT_N 24

struct work {
    long rounds;
    unsigned char composite[SIEVE_N + 1];
    uint64_t harr[HASH_N];
    double ma[MAT_N][MAT_N], mb[MAT_N][MAT_N], mc[MAT_N][MAT_N];
    uint64_t checksum;
};

static uint64_t sieve(struct work *w)
{
    memset(w->composite, 0, sizeof w->composite);
    uint64_t count = 0;
    for (uint64_t i = 2; i <= SIEVE_N; i++) {
        if (w->composite[i])
            continue;
        count++;
        for (uint64_t j = i * i; j <= SIEVE_N; j += i)
            w->composite[j] = 1;
    }
    return count;
}

static uint64_t hash_round(struct work *w, uint64_t seed)
{
    uint64_t h = seed ^ 0xcbf29ce484222325ULL;
    for (int i = 0; i < HASH_N; i++) {
        uint64_t x = w->harr[i] ^ h;
        x ^= x >> 33;
        x *= 0xff51afd7ed558ccdULL;
        x ^= x >> 33;
        w->harr[i] = x;
        h = (h ^ x) * 0x100000001b3ULL;
    }
    return h;
}

static uint64_t matmul(struct work *w, int round)
{
    for (int i = 0; i < MAT_N; i++)
        for (int j = 0; j < MAT_N; j++) {
            w->ma[i][j] = (double)((i * 7 + j * 3 + round) % 17) / 8.0;
            w->mb[i][j] = (double)((i * 5 + j * 11 + 2 * round) % 13) / 4.0 - 1.0;
        }
    for (int i = 0; i < MAT_N; i++)
        for (int j = 0; j < MAT_N; j++) {
            double s = 0.0;
            for (int k = 0; k < MAT_N; k++)
                s += w->ma[i][k] * w->mb[k][j];
            w->mc[i][j] = s;
        }
    double total = 0.0;
    for (int i = 0; i < MAT_N; i++)
        for (int j = 0; j < MAT_N; j++)
            total += w->mc[i][j] * (double)((i + j) % 5 + 1);
    return (uint64_t)(int64_t)(total * 32.0);
}

static void *worker(void *arg)
{
    struct work *w = arg;
    uint64_t c = 0;
    for (long r = 0; r < w->rounds; r++)
        c = c * 31 + sieve(w);
    for (int i = 0; i < HASH_N; i++)
        w->harr[i] = (uint64_t)i * 0x9e3779b97f4a7c15ULL;
    for (long r = 0; r < 40 * w->rounds; r++)
        c ^= hash_round(w, (uint64_t)r) + (uint64_t)r;
    for (long r = 0; r < 4 * w->rounds; r++)
        c = c * 1000003 + matmul(w, (int)r);
    w->checksum = c;
    return NULL;
}

int main(int argc, char **argv)
{
    double scale = argc > 1 ? strtod(argv[1], NULL) : 1.0;
    int threads = argc > 2 ? atoi(argv[2]) : 4;
    if (!(scale > 0.0))
        scale = 1.0;
    if (threads < 1 || threads > 64)
        threads = 4;
    long rounds = (long)(100 * scale + 0.5);
    if (rounds < 1)
        rounds = 1;

    pthread_t tid[64];
    struct work *w[64];
    for (int t = 0; t < threads; t++) {
        w[t] = calloc(1, sizeof *w[t]);
        if (!w[t])
            return 1;
        w[t]->rounds = rounds;
        pthread_create(&tid[t], NULL, worker, w[t]);
    }
    uint64_t total = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(tid[t], NULL);
        total = total * 7 + w[t]->checksum;
        free(w[t]);
    }
    printf("threads %d rounds %ld checksum %016llx\n", threads, rounds, (unsigned long long)total);
    return 0;
}
