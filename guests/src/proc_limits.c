/* Limits and /proc names as Linux has them for an ordinary process: setrlimit(RLIMIT_NOFILE)
 * raising the soft limit up to the hard one (Redis asks for 10032) and what the new limit
 * allows (dup2 below it, EBADF at it, F_DUPFD EINVAL), a soft limit above the hard one (EINVAL);
 * PR_GET_DUMPABLE 1, PR_SET_DUMPABLE 0 kept by a forked child and reset by execve, 2 refused;
 * /proc/self/comm, /proc/thread-self/comm and /proc/self/task/TID/comm read and written (glibc's
 * pthread_setname_np and pthread_getname_np for another thread go through them). Nothing printed
 * depends on the host's own limits. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* The result of a call, and its error if it failed (errno read after the call). */
#define SHOW(label, expr)                                                                      \
    do {                                                                                       \
        long r_ = (expr);                                                                      \
        int e_ = errno;                                                                        \
        printf("%s: %ld%s%s\n", label, r_, r_ < 0 ? " " : "", r_ < 0 ? strerror(e_) : "");   \
    } while (0)

static void show_file(const char *label, const char *path) {
    char buf[64] = {0};
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        printf("%s: open %s\n", label, strerror(errno));
        return;
    }
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    printf("%s: %zd bytes \"%.*s\"\n", label, n, (int)(n > 0 && buf[n - 1] == '\n' ? n - 1 : n), buf);
}

static pthread_barrier_t named, checked;

static void *worker(void *arg) {
    pthread_barrier_wait(&named);
    char name[16];
    prctl(PR_GET_NAME, name);
    printf("the worker's own PR_GET_NAME: \"%s\"\n", name);
    show_file("the worker's /proc/thread-self/comm", "/proc/thread-self/comm");
    pthread_barrier_wait(&checked);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "exec") == 0) {
        printf("after execve, PR_GET_DUMPABLE: %d\n", prctl(PR_GET_DUMPABLE));
        return 0;
    }
    setvbuf(stdout, NULL, _IONBF, 0);

    /* RLIMIT_NOFILE */
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rlim_t want = rl.rlim_max < 10032 ? rl.rlim_max : 10032;
    struct rlimit nl = {want, rl.rlim_max};
    SHOW("setrlimit(RLIMIT_NOFILE) to min(hard, 10032)", setrlimit(RLIMIT_NOFILE, &nl));
    getrlimit(RLIMIT_NOFILE, &rl);
    printf("the soft limit is now what was asked: %s\n", rl.rlim_cur == want ? "yes" : "no");
    int below = dup2(0, (int)want - 1);
    printf("dup2 to the limit - 1: %s\n", below == (int)want - 1 ? "ok" : strerror(errno));
    close(below);
    SHOW("dup2 to the limit", dup2(0, (int)want));
    SHOW("F_DUPFD at the limit", fcntl(0, F_DUPFD, (int)want));
    struct rlimit bad = {rl.rlim_max, rl.rlim_max - 1};
    SHOW("soft above hard", setrlimit(RLIMIT_NOFILE, &bad));
    struct rlimit low = {64, rl.rlim_max};
    setrlimit(RLIMIT_NOFILE, &low);
    SHOW("dup2 to 64 under a soft limit of 64", dup2(0, 64));

    /* Dumpable */
    printf("PR_GET_DUMPABLE: %d\n", prctl(PR_GET_DUMPABLE));
    SHOW("PR_SET_DUMPABLE 2", prctl(PR_SET_DUMPABLE, 2));
    prctl(PR_SET_DUMPABLE, 0);
    printf("after PR_SET_DUMPABLE 0: %d\n", prctl(PR_GET_DUMPABLE));
    pid_t c = fork();
    if (c == 0) {
        printf("a forked child's PR_GET_DUMPABLE: %d\n", prctl(PR_GET_DUMPABLE));
        execl("/proc/self/exe", argv[0], "exec", (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(c, &st, 0);
    prctl(PR_SET_DUMPABLE, 1);

    /* Thread names through /proc */
    show_file("/proc/self/comm at start", "/proc/self/comm");
    int fd = open("/proc/self/comm", O_WRONLY);
    printf("write \"renamed\" to /proc/self/comm: %zd\n", write(fd, "renamed", 7));
    close(fd);
    char name[16];
    prctl(PR_GET_NAME, name);
    printf("PR_GET_NAME after it: \"%s\"\n", name);
    fd = open("/proc/self/comm", O_WRONLY);
    printf("write 20 bytes: %zd\n", write(fd, "abcdefghijklmnopqrst", 20));
    close(fd);
    show_file("/proc/self/comm after it", "/proc/self/comm");
    show_file("/proc/self/task/999999/comm", "/proc/self/task/999999/comm");

    pthread_t t;
    pthread_barrier_init(&named, NULL, 2);
    pthread_barrier_init(&checked, NULL, 2);
    pthread_create(&t, NULL, worker, NULL);
    printf("pthread_setname_np(worker, \"worker-1\"): %d\n", pthread_setname_np(t, "worker-1"));
    char tn[16] = {0};
    printf("pthread_getname_np(worker): %d \"%s\"\n", pthread_getname_np(t, tn, sizeof tn), tn);
    pthread_barrier_wait(&named);
    pthread_barrier_wait(&checked);
    pthread_join(t, NULL);
    show_file("/proc/self/comm at the end", "/proc/self/comm");
    return 0;
}
