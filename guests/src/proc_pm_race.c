/* proc_pm_race: a persistence race ACROSS processes (HawkSet Fig. 3's shape, with fork for
 * pthread_create).  A formatting child writes and persists the value and is waited for; then the
 * parent stores the value and forks a reader child that loads it.
 * BUG: the parent persists the value only after the fork, so the reader's load is concurrent
 * with a store not yet durable (the same device line in both processes: the pool is mapped
 * MAP_SHARED before the forks).  FIXED twin (proc_pm_race_fixed, this source built with FIXED):
 * persisted before the fork, so nothing the reader loads is unpersisted.
 * Usage: proc_pm_race [POOL]; exits 0. */
#include <sys/wait.h>

#include "pm.h"

struct root {
    volatile uint64_t value;
    uint64_t pad[7];
};

static struct root *r;

/* Runs `f` in a child process and waits for it. */
static void in_child(void (*f)(void), int wait)
{
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
        f();
        _exit(0);
    }
    if (wait)
        waitpid(p, NULL, 0);
}

static void format(void)
{
    r->value = 0;
    persist((void *)&r->value, sizeof r->value);
}

static uint64_t seen;

static void reader(void)
{
    seen = r->value; /* LOAD: by the process forked after the store */
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    r = pm_map(path, 4096);
    in_child(format, 1);
    r->value = 1; /* BUG: stored before fork, persisted after it */
#ifdef FIXED
    PM_CLWB(&r->value); PM_SFENCE(); /* FIX: stored and persisted before the fork */
#endif
    in_child(reader, 0);
#ifndef FIXED
    PM_CLWB(&r->value); PM_SFENCE(); /* PERSIST: after the reader exists */
#endif
    wait(NULL);
    printf("value %llu\n", (unsigned long long)r->value);
    return 0;
}
