/* A process ends by exit_group while another of its threads holds a process-shared mutex that
 * a thread of another process waits for: as Linux's do_exit runs futex_exit_release for each
 * thread, the holder's robust list is walked (FUTEX_OWNER_DIED, a waiter woken) and the PI
 * futexes it owns are handed to their first waiter (exit_pi_state_list). Three mutexes: robust
 * and priority-inheriting (EOWNERDEAD), priority-inheriting only (taken with FUTEX_LOCK_PI,
 * FUTEX_OWNER_DIED in its word), robust only (EOWNERDEAD). Every line is the same natively and under ferrite: the child ends once the
 * lock's word shows the parent waiting (FUTEX_WAITERS). */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

struct shared {
    pthread_mutex_t m;
    atomic_int locked;
};

static struct shared *sh;

static void *holder(void *arg) {
    (void)arg;
    pthread_mutex_lock(&sh->m);
    atomic_store(&sh->locked, 1);
    for (;;)
        pause();
    return NULL;
}

/* A futex word: its owner ("me", "other" or none) and flags. */
static void show(unsigned w) {
    pid_t t = (pid_t)(w & FUTEX_TID_MASK);
    printf("owner %s%s%s\n", t == 0 ? "none" : t == (pid_t)syscall(SYS_gettid) ? "me" : "other",
           w & FUTEX_WAITERS ? " |WAITERS" : "", w & FUTEX_OWNER_DIED ? " |OWNER_DIED" : "");
}

static void round_of(const char *what, int robust, int protocol) {
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    if (robust)
        pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutexattr_setprotocol(&a, protocol);
    pthread_mutex_init(&sh->m, &a);
    atomic_store(&sh->locked, 0);
    pid_t child = fork();
    if (child == 0) {
        pthread_t t;
        pthread_create(&t, NULL, holder, NULL);
        /* The lock held by the other thread, and the parent queued on it. */
        _Atomic unsigned *word = (_Atomic unsigned *)&sh->m.__data.__lock;
        while (!(atomic_load(word) & 0x80000000u))
            usleep(1000);
        _exit(3); /* exit_group: the holder ends with it */
    }
    while (!atomic_load(&sh->locked))
        usleep(1000);
    if (robust) {
        int r = pthread_mutex_lock(&sh->m);
        printf("%-36s lock: %s\n", what, r == 0 ? "0" : strerror(r));
        if (r == EOWNERDEAD)
            printf("%-36s consistent: %d\n", "", pthread_mutex_consistent(&sh->m));
        printf("%-36s unlock: %d\n", "", pthread_mutex_unlock(&sh->m));
    } else {
        /* glibc asserts on a lock that is not robust and comes back with FUTEX_OWNER_DIED,
         * which Linux's hand-over sets: the raw calls, and the word shown. */
        unsigned *word = (unsigned *)&sh->m.__data.__lock;
        long r = syscall(SYS_futex, word, FUTEX_LOCK_PI, 0, NULL, NULL, 0);
        printf("%-36s FUTEX_LOCK_PI: %ld, ", what, r);
        show(*word);
        r = syscall(SYS_futex, word, FUTEX_UNLOCK_PI, 0, NULL, NULL, 0);
        printf("%-36s FUTEX_UNLOCK_PI: %ld, ", "", r);
        show(*word);
    }
    int st;
    waitpid(child, &st, 0);
    printf("%-36s the child ended: %d\n", "", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    pthread_mutex_destroy(&sh->m);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    sh = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    round_of("robust, PTHREAD_PRIO_INHERIT:", 1, PTHREAD_PRIO_INHERIT);
    round_of("PTHREAD_PRIO_INHERIT:", 0, PTHREAD_PRIO_INHERIT);
    round_of("robust:", 1, PTHREAD_PRIO_NONE);
    return 0;
}
