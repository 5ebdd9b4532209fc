/* ext_omp_fill: OpenMP over PM (built -O2 -fopenmp): a `#pragma omp for` fills a PM array of
 * cache-line cells, each iteration flushing its own line with clwb; the loop's implicit barrier
 * is the fence (libgomp's barrier is a locked instruction in every thread, which orders each
 * thread's flushes before it). Then one thread (`omp single`) checksums the array into the
 * header, persists it and marks the array valid. Recovery accepts an invalid header, and
 * otherwise requires the checksum to match the durable array.
 *   - BUG (without FIXED): the loop is `nowait` (NOWAIT_BUG): the thread that takes the single
 *     block checksums and persists the valid header while other threads are still storing and
 *     flushing their cells (a data race on the cells, and a header made durable from cells that
 *     are not).
 *   - FIXED (ext_omp_fill_fixed): the loop keeps its barrier.
 * Usage: ext_omp_fill [POOL]           formats and fills
 *        ext_omp_fill POOL recover     `recovery ok: ...` (exit 0) or `recovery: ...` (1) */
#include <fcntl.h>
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define CELLS 32

struct cell {
    uint64_t value;
    uint64_t pad[7];
};

struct pool {
    uint64_t valid;
    uint64_t sum;
    uint64_t pad[6];
    struct cell cells[CELLS];
};

__attribute__((target("clwb"))) static void persist(const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)63;
    for (; a < (uintptr_t)p + len; a += 64)
        _mm_clwb((void *)a);
    _mm_sfence();
}

static uint64_t value_of(int i)
{
    return (uint64_t)i * 2654435761u + 17;
}

__attribute__((target("clwb"))) static void fill(struct pool *pool)
{
#pragma omp parallel num_threads(4)
    {
#ifdef FIXED
#pragma omp for schedule(static)
#else
#pragma omp for schedule(static) nowait /* NOWAIT_BUG: no barrier after the loop */
#endif
        for (int i = 0; i < CELLS; i++) {
            pool->cells[i].value = value_of(i); /* CELL_STORE */
            _mm_clwb(&pool->cells[i]);          /* CELL_FLUSH */
        }
#pragma omp single
        {
            uint64_t sum = 0;
            for (int i = 0; i < CELLS; i++)
                sum += pool->cells[i].value; /* CELL_LOAD */
            pool->sum = sum;                 /* HEADER_STORE */
            persist(&pool->sum, sizeof pool->sum);
            pool->valid = 1; /* VALID_STORE */
            persist(&pool->valid, sizeof pool->valid);
        }
    }
}

static int recover(const struct pool *pool)
{
    if (!pool->valid) {
        printf("recovery ok: not valid\n");
        return 0;
    }
    uint64_t sum = 0;
    for (int i = 0; i < CELLS; i++)
        sum += pool->cells[i].value;
    if (sum != pool->sum) {
        printf("recovery: checksum mismatch\n");
        return 1;
    }
    printf("recovery ok: %d cells\n", CELLS);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/ompfill";
    int recovering = argc > 2 && strcmp(argv[2], "recover") == 0;
    int fd = open(path, recovering ? O_RDWR : O_RDWR | O_CREAT, 0644);
    struct stat st;
    if (recovering && (fd < 0 || fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(struct pool))) {
        printf("recovery ok: no pool\n");
        return 0;
    }
    if (fd < 0 || (!recovering && ftruncate(fd, sizeof(struct pool)) != 0)) {
        perror(path);
        return 1;
    }
    struct pool *pool = mmap(NULL, sizeof(struct pool), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (pool == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    if (recovering)
        return recover(pool);
    memset(pool, 0, sizeof *pool);
    persist(pool, sizeof *pool);
    fill(pool);
    printf("valid %llu\n", (unsigned long long)pool->valid);
    return 0;
}
