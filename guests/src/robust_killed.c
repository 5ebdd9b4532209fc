/* A process killed by another while its thread holds a robust mutex in shared memory: Linux's
 * exit path walks the dying process's robust list, so a waiter in another process gets
 * EOWNERDEAD (and can make the mutex consistent), as does a later locker. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static pthread_mutex_t *mx;
static int result = -1;

static void *waiter(void *arg) {
    (void)arg;
    result = pthread_mutex_lock(mx);
    if (result == EOWNERDEAD)
        pthread_mutex_consistent(mx);
    pthread_mutex_unlock(mx);
    return NULL;
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    mx = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(mx, &a);
    int p[2];
    if (pipe(p) != 0)
        return 1;
    pid_t c = fork();
    if (c == 0) {
        pthread_mutex_lock(mx);
        if (write(p[1], "x", 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    char x;
    if (read(p[0], &x, 1) != 1)
        return 1;
    pthread_t t;
    pthread_create(&t, NULL, waiter, NULL);
    struct timespec w = {0, 50000000};
    nanosleep(&w, NULL); /* the waiter blocks in the meantime */
    kill(c, SIGKILL);
    int st;
    waitpid(c, &st, 0);
    pthread_join(t, NULL);
    printf("child killed by signal %d; the waiter's lock: %s\n", WIFSIGNALED(st) ? WTERMSIG(st) : 0,
           result == EOWNERDEAD ? "EOWNERDEAD" : strerror(result));
    int r = pthread_mutex_lock(mx);
    printf("a later lock: %s\n", r == 0 ? "0" : strerror(r));
    pthread_mutex_unlock(mx);
    return 0;
}
