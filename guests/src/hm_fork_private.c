/* hm_fork_private: a parent and its forked child, each with its own copy of the private memory
 * and one shared anonymous mapping between them (hmtrace across processes).
 *   - The parent and the child both write `private_total` (a global) and their own stack slots
 *     while the other runs: after the fork those are two copies, not one location (no race).
 *   - Both add to `shared->hits` in a MAP_SHARED | MAP_ANONYMOUS page inherited through the
 *     fork, without synchronisation: one location, a data race (SHARED_RACE).
 * Usage: hm_fork_private; prints the totals and exits 0. */
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

struct shared {
    volatile uint64_t hits;
};

static volatile uint64_t private_total;

static __attribute__((noinline)) uint64_t work(struct shared *sh, uint64_t n)
{
    volatile uint64_t local[4] = {0, 0, 0, 0};
    for (uint64_t i = 0; i < n; i++) {
        local[i & 3] += i;           /* PRIVATE: a stack slot, one per process */
        private_total += i;          /* PRIVATE: a global, one per process */
        sh->hits = sh->hits + 1;     /* SHARED_RACE: the same page in both processes */
    }
    return local[0] + local[1] + local[2] + local[3];
}

int main(void)
{
    struct shared *sh = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    fflush(stdout);
    pid_t child = fork();
    if (child < 0) {
        perror("fork");
        return 1;
    }
    if (child == 0) {
        work(sh, 200);
        _exit(0);
    }
    uint64_t sum = work(sh, 200);
    waitpid(child, NULL, 0);
    printf("sum %llu private %llu\n", (unsigned long long)sum, (unsigned long long)private_total);
    return 0;
}
