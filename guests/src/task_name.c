/* A thread's name (prctl PR_SET_NAME / PR_GET_NAME, which pthread_setname_np and
 * pthread_getname_np use for the calling thread): the program's file name at start and after
 * execve, set names round-trip, cut to 15 bytes, a new thread and a forked child inherit the
 * name, each thread keeps its own, and an unreadable name is EFAULT. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static void show(const char *what) {
    char name[32];
    memset(name, 'x', sizeof name);
    if (prctl(PR_GET_NAME, name) != 0) {
        printf("%s: %s\n", what, strerror(errno));
        return;
    }
    /* The 16 bytes PR_GET_NAME writes, up to the NUL, and whether it wrote exactly 16. */
    printf("%s: \"%s\" (byte 16 untouched: %s)\n", what, name, name[16] == 'x' ? "yes" : "no");
}

static void *thread(void *arg) {
    (void)arg;
    show("a new thread");
    prctl(PR_SET_NAME, "worker");
    show("the thread, renamed");
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) {
        show("after execve");
        return 0;
    }
    show("at start");
    printf("PR_SET_NAME(\"main-loop\"): %d\n", prctl(PR_SET_NAME, "main-loop"));
    show("set");
    prctl(PR_SET_NAME, "a-name-longer-than-fifteen-bytes");
    show("a long name");
    prctl(PR_SET_NAME, "parent");
    pthread_t t;
    pthread_create(&t, NULL, thread, NULL);
    pthread_join(t, NULL);
    show("the main thread keeps its own");
    char tn[32];
    pthread_getname_np(pthread_self(), tn, sizeof tn);
    printf("pthread_getname_np: \"%s\"\n", tn);
    printf("PR_SET_NAME(bad pointer): %s\n", prctl(PR_SET_NAME, (char *)8) < 0 ? strerror(errno) : "ok");
    printf("PR_GET_NAME(bad pointer): %s\n", prctl(PR_GET_NAME, (char *)8) < 0 ? strerror(errno) : "ok");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        show("a forked child");
        fflush(stdout);
        execl("/proc/self/exe", argv[0], "again", (char *)0);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    printf("child exited %d\n", WEXITSTATUS(st));
    return 0;
}
