/* oscs_fork_private: a parent and its forked child, each with its own copy of a global mutex and
 * of the record it guards. Each process sets the record's owner (an order-sensitive write: the
 * last writer wins) inside critical sections of "its" mutex while the other runs. After the
 * fork the mutex and the record are two copies each, one per process: no common lock and no
 * shared byte, so no order-sensitive pair (OSCS compares sections of different threads holding
 * one mutex over one shared byte).
 * With the argument `shared`, the record and the mutex live in a MAP_SHARED page inherited
 * through the fork (a process-shared mutex): one lock, one byte, and the owner's value depends
 * on which process's section runs last — the order-sensitive pair (SHARED_OWNER).
 * Usage: oscs_fork_private [shared]; prints the owners and exits 0. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

struct record {
    pthread_mutex_t lock;
    volatile uint64_t owner;
    volatile uint64_t updates;
};

static struct record private_rec = {PTHREAD_MUTEX_INITIALIZER, 0, 0};

static __attribute__((noinline)) void claim(struct record *r, uint64_t me, int rounds)
{
    for (int i = 0; i < rounds; i++) {
        pthread_mutex_lock(&r->lock);
        r->owner = me; /* SHARED_OWNER: the last process to claim wins */
        pthread_mutex_unlock(&r->lock);
        sched_yield();
    }
}

int main(int argc, char **argv)
{
    struct record *r = &private_rec;
    if (argc > 1 && strcmp(argv[1], "shared") == 0) {
        r = mmap(0, sizeof *r, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        pthread_mutexattr_t a;
        pthread_mutexattr_init(&a);
        pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
        pthread_mutex_init(&r->lock, &a);
    }
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        claim(r, 2, 20);
        _exit(0);
    }
    claim(r, 1, 20);
    waitpid(child, 0, 0);
    printf("owner %s\n", r->owner == 1 || r->owner == 2 ? "set" : "unset");
    return 0;
}
