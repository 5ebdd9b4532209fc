/* proc_pm_race_fixed: a persistence race ACROSS processes (HawkSet Fig. 3's shape, with fork for
 * pthread_create).  A formatting child writes and persists the value and is waited for; then the
 * parent stores the value and forks a reader child that loads it.
 * FIXED: the parent persists the value before the fork, so nothing the reader loads is
 * unpersisted.  The racy twin is proc_pm_race.c.
 * Usage: proc_pm_race_fixed [POOL]; exits 0. */
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
    r->value = 1; /* FIX: stored and persisted before the fork */
    PM_CLWB(&r->value); PM_SFENCE();
    in_child(reader, 0);
    wait(NULL);
    printf("value %llu\n", (unsigned long long)r->value);
    return 0;
}
