/* errno_tls: each thread's errno and a thread-local counter of its own, for gdb's `p errno`
 * and `p tls_counter` through ferrite's server (qGetTLSAddr). The main thread fails an open
 * (ENOENT), a second thread fails a close (EBADF); each then calls stop_here(). Exits 0. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

__thread int tls_counter = 7;

__attribute__((noinline)) void stop_here(int seen)
{
    __asm__ volatile("" : : "r"(seen) : "memory");
}

static void *worker(void *arg)
{
    (void)arg;
    tls_counter = 42;
    close(-1);
    stop_here(errno);
    return NULL;
}

int main(void)
{
    tls_counter = 11;
    if (open("/nonexistent/errno_tls", O_RDONLY) >= 0)
        return 1;
    int main_errno = errno;
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
    errno = main_errno;
    stop_here(errno);
    printf("errno %d counter %d\n", errno, tls_counter);
    return 0;
}
