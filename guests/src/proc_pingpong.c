/* proc_pingpong: N request/response round trips over two pipes, between two processes (fork)
 * or between two threads of one process: the same work, so the difference in host time is
 * the cost of process switches (docs/performance.md).
 * Each answer costs WORK rounds of a multiplicative hash (default 0), a request's own work.
 * Usage: proc_pingpong procs|threads N [WORK]; prints the sum of the answers, exits 0. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int down[2], up[2];
static long n, work;
static volatile unsigned long sink;

/* The server: answers each request (a number) with its successor, until EOF. */
static void *serve(void *arg)
{
    (void)arg;
    long v;
    while (read(down[0], &v, sizeof v) == sizeof v) {
        unsigned long h = (unsigned long)v;
        for (long k = 0; k < work; k++)
            h = h * 0x9e3779b97f4a7c15ul + 1;
        sink = h;
        v++;
        if (write(up[1], &v, sizeof v) != sizeof v)
            break;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int procs = argc > 1 && !strcmp(argv[1], "procs");
    n = argc > 2 ? atol(argv[2]) : 1000;
    work = argc > 3 ? atol(argv[3]) : 0;
    if (pipe(down) || pipe(up))
        return 1;
    pid_t child = -1;
    pthread_t t;
    if (procs) {
        child = fork();
        if (child == 0) {
            close(down[1]);
            serve(NULL);
            _exit(0);
        }
    } else {
        pthread_create(&t, NULL, serve, NULL);
    }
    long sum = 0;
    for (long i = 0; i < n; i++) {
        long v = i;
        if (write(down[1], &v, sizeof v) != sizeof v || read(up[0], &v, sizeof v) != sizeof v)
            return 1;
        sum += v;
    }
    close(down[1]);
    if (procs)
        waitpid(child, NULL, 0);
    else
        pthread_join(t, NULL);
    printf("sum %ld\n", sum);
    return 0;
}
