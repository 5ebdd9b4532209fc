/* /proc/PID/stat, status, cmdline and comm of another process (what ps reads), and
 * /proc/self/cmdline: a child that names itself and waits on a pipe is sleeping (S), its
 * parent's child, in its group; stopped it is T; killed and not yet waited for, a zombie (Z)
 * with its name and an empty cmdline; reaped, gone. Every line is the same natively and under
 * ferrite: it polls the child's state until it is the one it waits for. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static ssize_t slurp(const char *path, char *buf, size_t n) {
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -errno;
    ssize_t total = 0, r;
    while ((r = read(fd, buf + total, n - 1 - total)) > 0)
        total += r;
    close(fd);
    buf[total] = 0;
    return total;
}

/* The fields of /proc/PID/stat after the name: state, ppid, pgrp, and the thread count. */
struct stat_fields {
    char name[32];
    char state;
    int ppid, pgrp, threads;
    long fields;
};

static int read_stat(pid_t pid, struct stat_fields *f) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    if (slurp(path, buf, sizeof buf) < 0)
        return -1;
    char *open_paren = strchr(buf, '('), *close_paren = strrchr(buf, ')');
    if (!open_paren || !close_paren)
        return -1;
    snprintf(f->name, sizeof f->name, "%.*s", (int)(close_paren - open_paren - 1), open_paren + 1);
    int session, tty, tpgid;
    unsigned flags;
    unsigned long minflt, cminflt, majflt, cmajflt, utime, stime;
    long cutime, cstime, prio, nice;
    sscanf(close_paren + 2, "%c %d %d %d %d %d %u %lu %lu %lu %lu %lu %lu %ld %ld %ld %ld %d", &f->state, &f->ppid,
           &f->pgrp, &session, &tty, &tpgid, &flags, &minflt, &cminflt, &majflt, &cmajflt, &utime, &stime, &cutime,
           &cstime, &prio, &nice, &f->threads);
    f->fields = 2;
    for (char *p = close_paren + 1; *p; p++)
        if (*p == ' ')
            f->fields++;
    return 0;
}

static char wait_state(pid_t pid, const char *want) {
    struct stat_fields f;
    for (int i = 0; i < 5000; i++) {
        if (read_stat(pid, &f) == 0 && strchr(want, f.state))
            return f.state;
        usleep(1000);
    }
    return '?';
}

/* A line of /proc/PID/status, "Key:\tvalue", its value. */
static const char *status_line(pid_t pid, const char *key) {
    static char out[128];
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    if (slurp(path, buf, sizeof buf) < 0)
        return "(none)";
    size_t k = strlen(key);
    for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (strncmp(l, key, k) == 0 && l[k] == ':') {
            char *v = l + k + 1;
            while (*v == '\t' || *v == ' ')
                v++;
            size_t n = strcspn(v, "\n");
            snprintf(out, sizeof out, "%.*s", (int)n, v);
            return out;
        }
    }
    return "(missing)";
}

static void show_cmdline(const char *what, const char *path) {
    char buf[512];
    ssize_t n = slurp(path, buf, sizeof buf);
    printf("%s: ", what);
    if (n < 0) {
        printf("%s\n", strerror((int)-n));
        return;
    }
    for (ssize_t i = 0; i < n; i++)
        putchar(buf[i] ? buf[i] : '|');
    printf(" (%zd bytes)\n", n);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    (void)argc;
    (void)argv;
    show_cmdline("/proc/self/cmdline", "/proc/self/cmdline");
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cmdline", getpid());
    show_cmdline("/proc/PID/cmdline of itself", path);

    int p[2];
    if (pipe(p))
        return 1;
    pid_t child = fork();
    if (child == 0) {
        close(p[1]);
        prctl(PR_SET_NAME, "pid-files-kid");
        char c;
        while (read(p[0], &c, 1) < 0 && errno == EINTR)
            ;
        _exit(0);
    }
    close(p[0]);
    printf("the child waiting on a pipe: state %c\n", wait_state(child, "S"));
    struct stat_fields f;
    read_stat(child, &f);
    printf("  stat: name %s, parent %s, group %s, threads %d, %ld fields\n", f.name,
           f.ppid == getpid() ? "me" : "other", f.pgrp == getpgrp() ? "mine" : "other", f.threads, f.fields);
    printf("  status: Name %s,", status_line(child, "Name"));
    printf(" State %s,", status_line(child, "State"));
    printf(" PPid %s,", atoi(status_line(child, "PPid")) == getpid() ? "me" : "other");
    printf(" Threads %s\n", status_line(child, "Threads"));
    snprintf(path, sizeof path, "/proc/%d/cmdline", child);
    show_cmdline("  cmdline (its parent's, a fork)", path);
    char buf[64];
    snprintf(path, sizeof path, "/proc/%d/comm", child);
    printf("  comm: %s", slurp(path, buf, sizeof buf) > 0 ? buf : "(none)\n");
    int fd = open(path, O_WRONLY);
    errno = 0;
    ssize_t w = fd >= 0 ? write(fd, "renamed", 7) : -1;
    printf("  writing its comm from here: %s\n", w < 0 ? strerror(errno) : "written");
    if (fd >= 0)
        close(fd);

    kill(child, SIGSTOP);
    printf("stopped: state %c\n", wait_state(child, "T"));
    printf("  status: State %s\n", status_line(child, "State"));
    kill(child, SIGKILL);
    printf("killed, not waited for: state %c\n", wait_state(child, "Z"));
    read_stat(child, &f);
    printf("  stat: name %s, parent %s\n", f.name, f.ppid == getpid() ? "me" : "other");
    printf("  status: State %s\n", status_line(child, "State"));
    snprintf(path, sizeof path, "/proc/%d/cmdline", child);
    show_cmdline("  cmdline", path);
    int st;
    waitpid(child, &st, 0);
    snprintf(path, sizeof path, "/proc/%d/stat", child);
    printf("reaped: /proc/CHILD/stat %s\n", slurp(path, buf, sizeof buf) < 0 ? "gone" : "still there");
    return 0;
}
