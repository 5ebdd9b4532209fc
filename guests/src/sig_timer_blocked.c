/* A periodic timer whose signal nobody takes, while the only thread waits forever: SIGALRM is
 * blocked, a 1 ms ITIMER_REAL keeps expiring, and the thread reads a pipe nobody writes.
 * Natively it hangs forever; ferrite must report a deadlock, not jump its clock from expiry to
 * expiry without end. stdout: one line, flushed before the wait. */
#include <signal.h>
#include <stdio.h>
#include <sys/time.h>
#include <unistd.h>

int main(void) {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGALRM);
    sigprocmask(SIG_BLOCK, &s, NULL);
    struct itimerval it = {{0, 1000}, {0, 1000}};
    setitimer(ITIMER_REAL, &it, NULL);
    int p[2];
    if (pipe(p) != 0)
        return 1;
    printf("waiting with a blocked periodic timer\n");
    fflush(stdout);
    char c;
    return (int)read(p[0], &c, 1); /* BLOCKED FOREVER */
}
