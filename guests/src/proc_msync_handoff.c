/* proc_msync_handoff: a child process fills a PM pool and persists it with a system call (msync,
 * or fsync of the pool file), exits, and the parent that waited for it reads what it wrote.
 * BUG: the child persists only the first page, so the second page's record is still not
 * durable when the parent reads it after waitpid (a crash after the child's exit loses it).
 * FIXED twin (proc_msync_handoff_fixed, this source built with FIXED): the whole pool is
 * persisted before the child exits; the parent's reads are ordered after its exit (wait4), so
 * nothing they read is unpersisted.
 * Usage: proc_msync_handoff [POOL] [msync|fsync] (fsync: the fixed twin only); prints the two records and exits 0. */
#include <string.h>
#include <sys/wait.h>

#include "pm.h"

#define PAGE 4096

struct rec {
    volatile uint64_t key;
    volatile uint64_t value;
};

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    int by_fsync = argc > 2 && strcmp(argv[2], "fsync") == 0;
    char *pool = pm_map(path, 2 * PAGE);
    struct rec *first = (struct rec *)pool, *second = (struct rec *)(pool + PAGE);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        first->key = 1, first->value = 100; /* FIRST: on the page persisted in both twins */
        second->key = 2, second->value = 200; /* STORE: the second page's record */
#ifdef FIXED
        /* FIX: both pages, by msync or by fsync of the pool file */
        int fd = by_fsync ? open(path, O_RDWR) : -1;
        if (by_fsync ? fd < 0 || fsync(fd) != 0 : msync(pool, 2 * PAGE, MS_SYNC) != 0)
            _exit(2);
#else
        (void)by_fsync;
        if (msync(pool, PAGE, MS_SYNC) != 0) /* BUG: the first page only */
            _exit(2);
#endif
        _exit(0);
    }
    int status = 0;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return 2;
    uint64_t k1 = first->key, v1 = first->value;
    uint64_t k2 = second->key, v2 = second->value; /* LOAD: after the child's exit */
    printf("%llu=%llu %llu=%llu\n", (unsigned long long)k1, (unsigned long long)v1, (unsigned long long)k2,
           (unsigned long long)v2);
    return 0;
}
