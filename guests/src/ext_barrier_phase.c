/* ext_barrier_phase: a 1-D stencil over a PM array computed in phases separated by
 * pthread_barrier_wait, as an HPC-style checkpointing code is written (built -O0 -g, as research
 * artifacts are). Three workers own contiguous blocks of two PM grids (double-buffered); in each
 * phase a worker computes its cells of the next grid from its cells and its neighbours' border
 * cells of the current grid, then everyone meets at a barrier. Worker 0 records the phase
 * number in PM after each barrier, so a restart resumes from the last complete grid.
 *   - BUG (this file): a worker persists its new cells only after the barrier, i.e. while its
 *     neighbours already read them in the next phase: they load border cells that are not yet
 *     durable and store durable results derived from them (CELL_STORE / BORDER_LOAD), and the
 *     phase number can be durable before the grid it names.
 *   - FIXED (ext_barrier_phase_fixed, built with -DFIXED): each worker persists its cells
 *     before the barrier.
 * Usage: ext_barrier_phase [POOL]; prints `phase 4 checksum N`, exits 0. */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#define WORKERS 3
#define CELLS_PER 8
#define CELLS (WORKERS * CELLS_PER)
#define PHASES 4

struct grid {
    uint64_t phase;
    uint64_t pad[7];
    uint64_t cell[2][CELLS];
};

static struct grid *g;
static pthread_barrier_t bar;

static void persist_range(void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)63;
    for (; a < (uintptr_t)p + n; a += 64)
        __asm__ volatile("clwb %0" : "+m"(*(volatile char *)a)::"memory");
    __asm__ volatile("sfence" ::: "memory");
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    int lo = id * CELLS_PER, hi = lo + CELLS_PER;
    for (int ph = 0; ph < PHASES; ph++) {
        uint64_t *cur = g->cell[ph & 1], *next = g->cell[(ph + 1) & 1];
        for (int i = lo; i < hi; i++) {
            uint64_t left = i > 0 ? cur[i - 1] : 0;          /* BORDER_LOAD: left */
            uint64_t right = i < CELLS - 1 ? cur[i + 1] : 0; /* BORDER_LOAD: right */
            next[i] = (left + 2 * cur[i] + right) / 4 + 1;   /* CELL_STORE */
        }
#ifdef FIXED
        persist_range(&next[lo], CELLS_PER * sizeof(uint64_t)); /* FIX: durable before the barrier */
#endif
        pthread_barrier_wait(&bar);
#ifndef FIXED
        persist_range(&next[lo], CELLS_PER * sizeof(uint64_t)); /* BUG: durable after the barrier */
#endif
        if (id == 0) {
            g->phase = ph + 1;
            persist_range(&g->phase, sizeof g->phase);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/stencil";
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, sizeof(struct grid)) != 0) {
        perror(path);
        return 1;
    }
    g = mmap(NULL, sizeof(struct grid), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (g == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    for (int i = 0; i < CELLS; i++)
        g->cell[0][i] = (uint64_t)(i * 37 % 11) * 100;
    persist_range(g, sizeof *g);
    pthread_barrier_init(&bar, NULL, WORKERS);
    pthread_t t[WORKERS];
    for (intptr_t i = 0; i < WORKERS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(t[i], NULL);
    uint64_t sum = 0;
    for (int i = 0; i < CELLS; i++)
        sum += g->cell[PHASES & 1][i];
    printf("phase %llu checksum %llu\n", (unsigned long long)g->phase, (unsigned long long)sum);
    munmap(g, sizeof *g);
    close(fd);
    return 0;
}
