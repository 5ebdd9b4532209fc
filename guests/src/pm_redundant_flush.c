/* pm_redundant_flush: stores a PM line and persists it (clwb + sfence), then
 * flushes the same, already clean, line again with nothing stored in between
 * (a redundant flush, a performance bug) followed by another sfence.  A second
 * line is persisted normally.  All data is persisted.  Exit status 0.
 *
 * Usage: pm_redundant_flush [POOL]      POOL defaults to /mnt/pmem0/pool
 */
#include "pm.h"

#define POOL_SIZE 4096

struct data {
    _Alignas(64) uint64_t a[8];
    _Alignas(64) uint64_t b[8];
};

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    struct data *d = pm_map(path, POOL_SIZE);

    d->a[0] = 0x1234; /* STORE: line a */
    PM_CLWB(&d->a[0]); /* FLUSH: first (needed) flush of line a */
    PM_SFENCE();
    PM_CLWB(&d->a[0]); /* BUG: redundant flush */
    PM_SFENCE();

    d->b[0] = 0x5678; /* STORE: line b */
    persist(&d->b[0], sizeof d->b[0]);

    printf("a: %llx b: %llx\n", (unsigned long long)d->a[0], (unsigned long long)d->b[0]);
    return 0;
}
