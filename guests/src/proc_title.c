/* setproctitle-style argument rewriting and /proc/PID/cmdline, read as Linux reads it from the
 * process's memory: arguments edited in place within their area, then a title written over the
 * last NUL and on into the environment (as servers such as nginx or PostgreSQL name their
 * processes), read by the process itself and by its parent; and prctl(PR_SET_NAME) in comm. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static void show(const char *who, pid_t pid) {
    char path[64], buf[8192];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    int fd = open(path, O_RDONLY);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf);
    if (fd >= 0)
        close(fd);
    printf("%s: %zd bytes:", who, n);
    for (ssize_t i = 0; i < n; i++)
        putchar(buf[i] ? buf[i] : '|');
    putchar('\n');
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    fd = open(path, O_RDONLY);
    n = fd < 0 ? -1 : read(fd, buf, sizeof buf);
    if (fd >= 0)
        close(fd);
    printf("%s: comm %.*s", who, (int)(n > 0 ? n : 0), buf);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc < 3) {
        /* Run again with known arguments and a known environment. */
        char *args[] = {argv[0], "alpha", "beta", NULL};
        /* Room in the environment for a title longer than the arguments wherever the program
         * lies (its path is argv[0]). */
        static char pad[400];
        memset(pad, 'p', sizeof pad - 1);
        memcpy(pad, "PAD=", 4);
        char *env[] = {"A=1", pad, NULL};
        execve(argv[0], args, env);
        perror("execve");
        return 1;
    }
    show("as started", getpid());
    /* Within the area: argv[1] shortened, its NUL moved. */
    strcpy(argv[1], "al");
    show("argv[1] shortened", getpid());
    int p[2];
    if (pipe(p) != 0)
        return 1;
    pid_t c = fork();
    if (c == 0) {
        /* A title over every argument, the last NUL and into the environment. */
        char *start = argv[0];
        int last = 0;
        while (environ[last + 1])
            last++;
        char *end = environ[last] + strlen(environ[last]);
        memset(start, 0, end - start);
        /* 250 bytes and its NUL: past the arguments, within the environment. */
        int n = snprintf(start, end - start, "worker: serving connections on port 8080 ");
        memset(start + n, '.', 250 - n);
        prctl(PR_SET_NAME, "kv-worker");
        if (write(p[1], "x", 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    char x;
    if (read(p[0], &x, 1) != 1)
        return 1;
    show("the child, seen by its parent", c);
    kill(c, 9);
    waitpid(c, NULL, 0);
    /* The last argument's NUL overwritten, the title shorter than the area. */
    argv[2][strlen(argv[2])] = 'X';
    show("last NUL overwritten", getpid());
    return 0;
}
