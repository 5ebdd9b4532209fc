/* pm_dirty_lines: a crash-testing benchmark. Stores one word into each of N PM lines, then
 * flushes them all and fences once: the fence's crash point has N lines pending, 2^N images.
 * Usage: pm_dirty_lines POOL N        (N <= 512; prints `lines N`)
 *        pm_dirty_lines POOL N check [R [K]]  (each of the first K lines (default N) holds 0 or
 *                                          its index + 1: exits 0, else 1; then R passes over the
 *                                          whole pool, as a recovery that scans its pool would
 *                                          make: about 20k instructions each) */
#include "pm.h"

#define MAX_LINES 512

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    int n = argc > 2 ? atoi(argv[2]) : 8;
    if (n < 0 || n > MAX_LINES)
        n = 8;
    size_t size = MAX_LINES * PM_CACHELINE;
    if (argc > 3 && strcmp(argv[3], "check") == 0) {
        uint64_t *p = pm_open(path, size, 0);
        int k = argc > 5 ? atoi(argv[5]) : n;
        for (int i = 0; i < n && i < k; i++) {
            uint64_t v = p[i * 8];
            if (v != 0 && v != (uint64_t)i + 1)
                return 1;
        }
        int rounds = argc > 4 ? atoi(argv[4]) : 0;
        uint64_t sum = 0;
        for (int r = 0; r < rounds; r++)
            for (size_t w = 0; w < size / sizeof(uint64_t); w++)
                sum = sum * 31 + ((volatile uint64_t *)p)[w];
        printf("ok %d\n", (int)(sum != 1));
        return 0;
    }
    uint64_t *p = pm_map(path, size);
    for (int i = 0; i < n; i++)
        p[i * 8] = (uint64_t)i + 1;
    for (int i = 0; i < n; i++)
        PM_CLWB(&p[i * 8]);
    PM_SFENCE();
    printf("lines %d\n", n);
    return 0;
}
