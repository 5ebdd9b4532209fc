// /proc/self/task lists the calling process's threads (each one's gettid), /proc/PID/task a
// child process's (its one thread, its pid), /proc/self/task/TID holds comm, and /proc/self/fd
// lists the open descriptors. Ids differ between runs, so the probe prints what it checked.
// Every line is the same natively and under ferrite.
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static pthread_barrier_t started, done;
static pid_t tids[2];

static void *worker(void *arg) {
    tids[(long)arg] = gettid();
    pthread_barrier_wait(&started);
    pthread_barrier_wait(&done);
    return NULL;
}

// The numeric entries of `dir`, into `out` (at most 16); the count, or -1.
static int numbers(const char *dir, long *out) {
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (n < 16)
            out[n] = atol(e->d_name);
        n++;
    }
    closedir(d);
    return n;
}

static int has(const long *v, int n, long x) {
    for (int i = 0; i < n; i++)
        if (v[i] == x)
            return 1;
    return 0;
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    pthread_barrier_init(&started, NULL, 3);
    pthread_barrier_init(&done, NULL, 3);
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    pthread_barrier_wait(&started);
    long v[16];
    int n = numbers("/proc/self/task", v);
    printf("/proc/self/task: %d entries, the main thread %s, the workers %s, ascending %s\n", n,
           has(v, n, gettid()) ? "listed" : "missing", has(v, n, tids[0]) && has(v, n, tids[1]) ? "listed" : "missing",
           n == 3 && v[0] < v[1] && v[1] < v[2] ? "yes" : "no");
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d", tids[1]);
    DIR *d = opendir(path);
    int comm = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        comm |= strcmp(e->d_name, "comm") == 0;
    if (d)
        closedir(d);
    printf("/proc/self/task/TID lists comm: %s\n", comm ? "yes" : "no");
    pthread_barrier_wait(&done);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    /* A joined thread's task can outlive its join for a moment (the kernel clears the tid word
     * the join waits on before it reaps the task): wait for it, up to a second. */
    for (int k = 0; (n = numbers("/proc/self/task", v)) > 1 && k < 1000; k++)
        usleep(1000);
    printf("after the joins: %d entries\n", n);
    int p[2];
    pipe(p);
    pid_t child = fork();
    if (child == 0) {
        char c;
        read(p[0], &c, 1);
        _exit(0);
    }
    snprintf(path, sizeof path, "/proc/%d/task", child);
    n = numbers(path, v);
    printf("/proc/CHILD/task: %d entries, the child's pid %s\n", n, n == 1 && v[0] == child ? "listed" : "missing");
    write(p[1], "x", 1);
    waitpid(child, NULL, 0);
    n = numbers("/proc/self/fd", v);
    printf("/proc/self/fd: the pipe's ends %s\n", has(v, n, p[0]) && has(v, n, p[1]) ? "listed" : "missing");
    printf("proc_task_probe done\n");
    return 0;
}
