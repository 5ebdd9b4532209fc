/* sig_signalfd_thread: a signal sent to one thread (tgkill) is that thread's: another thread's
 * signalfd neither polls readable for it nor reads it; a signal sent to the process (kill) is
 * read by either.  Prints what poll and read see, as Linux's dequeue_signal decides.
 * Usage: sig_signalfd_thread   exits 0 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_barrier_t barrier;
static pid_t other;

static void *worker(void *arg)
{
    (void)arg;
    other = (pid_t)syscall(SYS_gettid);
    pthread_barrier_wait(&barrier);
    pthread_barrier_wait(&barrier);
    return NULL;
}

static void look(int fd, const char *what)
{
    struct pollfd p = { fd, POLLIN, 0 };
    int ready = poll(&p, 1, 0);
    struct signalfd_siginfo si;
    ssize_t n = read(fd, &si, sizeof si);
    if (n < 0)
        printf("%s: poll %d, read %s\n", what, ready, errno == EAGAIN ? "EAGAIN" : "error");
    else
        printf("%s: poll %d, read signal %u\n", what, ready, si.ssi_signo);
}

int main(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    sigprocmask(SIG_BLOCK, &set, NULL);
    int fd = signalfd(-1, &set, SFD_NONBLOCK);
    pthread_barrier_init(&barrier, NULL, 2);
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_barrier_wait(&barrier);
    syscall(SYS_tgkill, getpid(), other, SIGUSR1);
    look(fd, "another thread's SIGUSR1");
    kill(getpid(), SIGUSR2);
    look(fd, "the process's SIGUSR2");
    pthread_barrier_wait(&barrier);
    pthread_join(t, NULL);
    return 0;
}
