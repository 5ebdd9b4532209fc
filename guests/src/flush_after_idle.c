/* flush_after_idle: a persist routine that runs at start-up, then not at all for tens of millions
 * of instructions, then again. ferrite removes the code hooks of flushes and fences that stopped
 * running (Unicorn walks every code hook at each hooked instruction), and hooks them again when
 * they run again: the second round's flush and fence must be seen as the first round's were.
 *   - BUG (this file): the second record is stored and never persisted: the one finding.
 *   - FIXED (flush_after_idle_fixed): it is persisted with the same routine: no finding. Were the
 *     routine's flush missed after the idle stretch, the fixed twin's store would be reported.
 * Usage: flush_after_idle [POOL]; prints the checksum of the idle loop, exits 0. */
#include <pthread.h>

#include "pm.h"

__attribute__((noinline)) static void persist_line(volatile uint64_t *p)
{
    PM_CLWB(p);
    PM_SFENCE();
}

static volatile uint64_t *pm;

/* The first round, in a thread: creating and joining one hooks a few dozen of libc's locked
 * instructions, which then do not run again either. */
static void *first_round(void *arg)
{
    (void)arg;
    pm[0] = 1;
    persist_line(&pm[0]);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    pm = pm_map(path, 4096);
    pthread_t t;
    pthread_create(&t, NULL, first_round, NULL);
    pthread_join(t, NULL);
    /* About 40 M instructions with no flush, fence or locked instruction. */
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 8000000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    pm[8] = x; /* BUG: never persisted (the fixed twin persists it) */
#ifdef FIXED
    persist_line(&pm[8]);
#endif
    printf("%llu\n", (unsigned long long)(x & 0xffff));
    return 0;
}
