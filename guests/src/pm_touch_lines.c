/* pm_touch_lines: a memory benchmark for the PM device. Maps a PM file of SIZE bytes and
 * stores one 8-byte word into every STRIDE-th 64-byte line, PASSES times over.
 * Usage: pm_touch_lines POOL SIZE STRIDE MODE [PASSES]
 *   SIZE    bytes, with an optional K, M or G suffix (powers of 1024), e.g. 64M, 1G
 *   STRIDE  touch lines 0, STRIDE, 2*STRIDE, ... (1: every line; 100: 1% of the lines)
 *   MODE    persist: clwb + sfence after each store (the line is durable at once)
 *           store:   no flush, no fence (every touched line stays unpersisted)
 *           flush:   clwb after each store, one sfence at the end of each pass
 *   PASSES  default 1; pass p stores p * lines + i + 1 into the i-th touched line
 * Prints `touched N lines, checksum C` (N per pass) and exits 0; 2 on a bad argument. */
#include "pm.h"

static size_t parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    switch (*end) {
    case 'K': case 'k': v <<= 10; end++; break;
    case 'M': case 'm': v <<= 20; end++; break;
    case 'G': case 'g': v <<= 30; end++; break;
    default: break;
    }
    if (*end != '\0' || end == s)
        return 0;
    return (size_t)v;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: pm_touch_lines POOL SIZE STRIDE persist|store|flush [PASSES]\n");
        return 2;
    }
    size_t size = parse_size(argv[2]);
    long stride = atol(argv[3]);
    const char *mode = argv[4];
    long passes = argc > 5 ? atol(argv[5]) : 1;
    int persist = strcmp(mode, "persist") == 0, flush = strcmp(mode, "flush") == 0;
    if (size < PM_CACHELINE || stride < 1 || passes < 1 || !(persist || flush || strcmp(mode, "store") == 0)) {
        fprintf(stderr, "pm_touch_lines: bad argument\n");
        return 2;
    }
    char *pool = pm_map(argv[1], size);
    size_t lines = size / PM_CACHELINE;
    size_t touched = (lines + (size_t)stride - 1) / (size_t)stride;
    for (long p = 0; p < passes; p++) {
        size_t n = 0;
        for (size_t l = 0; l < lines; l += (size_t)stride, n++) {
            uint64_t *w = (uint64_t *)(pool + l * PM_CACHELINE);
            *w = (uint64_t)p * touched + n + 1;
            if (persist || flush)
                PM_CLWB(w);
            if (persist)
                PM_SFENCE();
        }
        if (flush)
            PM_SFENCE();
    }
    uint64_t sum = 0;
    for (size_t l = 0; l < lines; l += (size_t)stride)
        sum += *(volatile uint64_t *)(pool + l * PM_CACHELINE);
    printf("touched %zu lines, checksum %llu\n", touched, (unsigned long long)sum);
    return 0;
}
