/* pm_unflushed_fence: stores two PM lines.  The first is persisted properly
 * (clwb + sfence).  The second is stored and clwb'd but no fence follows: all
 * output is printed and flushed *before* the store, and the program then leaves
 * with _exit(0) right after the clwb, so no sfence/mfence/locked instruction
 * executes after it.  Exit status 0.
 *
 * Usage: pm_unflushed_fence [POOL]      POOL defaults to /mnt/pmem0/pool
 */
#include "pm.h"

#define POOL_SIZE 4096

struct data {
    _Alignas(64) uint64_t good[8];
    _Alignas(64) uint64_t unfenced[8];
};

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    struct data *d = pm_map(path, POOL_SIZE);

    d->good[0] = 0xabcdef; /* STORE: persisted line */
    persist(&d->good[0], sizeof d->good[0]);

    printf("good line persisted: %llx\n", (unsigned long long)d->good[0]);
    printf("storing the unfenced line and leaving\n");
    fflush(stdout);

    d->unfenced[0] = 0x123456; /* STORE: unfenced line */
    PM_CLWB(&d->unfenced[0]); /* BUG: flush without fence */
    _exit(0);
}
