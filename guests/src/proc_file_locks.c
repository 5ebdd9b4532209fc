/* proc_file_locks: advisory file locks between processes, as SQLite, flock(1) and mail tools
 * use them. Four children add 1 to counters in files 40 times each under an fcntl record lock
 * (c1) and under flock (c2), with a system call between the read and the write so that another
 * process can run there: the counters end at 160 only if the locks exclude each other. Then,
 * one step at a time (the steps ordered by pipes, so the output is the same natively):
 * F_GETLK names the parent's lock; F_SETLK and F_OFD_SETLK conflicting with it fail with
 * EAGAIN, flock(LOCK_NB) with EWOULDBLOCK from another description and not from the inherited
 * one; flock and record locks do not see each other; the parent's record locks go when it
 * closes any descriptor of the file; a child waiting in F_SETLKW gets the lock when the parent
 * unlocks. Prints one line per step; exits 0. Not one process: before, every lock was granted
 * and the counters lost updates (a sweep found SQLite losing inserts). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

static int setlk(int fd, int cmd, short type, off_t start, off_t len)
{
    struct flock l = {.l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len};
    return fcntl(fd, cmd, &l);
}

static void bump(const char *name, int use_flock)
{
    int fd = open(name, O_RDWR);
    if (fd < 0)
        exit(10);
    if (use_flock ? flock(fd, LOCK_EX) : setlk(fd, F_SETLKW, F_WRLCK, 0, 0))
        exit(11);
    char b[32] = {0};
    if (pread(fd, b, sizeof b - 1, 0) < 0)
        exit(12);
    int v = atoi(b);
    getppid(); /* another process may run here */
    int n = snprintf(b, sizeof b, "%d\n", v + 1);
    if (pwrite(fd, b, n, 0) != n)
        exit(13);
    if (use_flock ? flock(fd, LOCK_UN) : setlk(fd, F_SETLK, F_UNLCK, 0, 0))
        exit(14);
    close(fd);
}

static int counter(const char *name)
{
    char b[32] = {0};
    int fd = open(name, O_RDONLY);
    if (fd < 0 || read(fd, b, sizeof b - 1) < 0)
        return -1;
    close(fd);
    return atoi(b);
}

static void say(int fd) { (void)!write(fd, "x", 1); }
static void hear(int fd) { char c; (void)!read(fd, &c, 1); }

int main(void)
{
    for (int i = 1; i <= 2; i++) {
        char name[8];
        snprintf(name, sizeof name, "c%d", i);
        int fd = open(name, O_CREAT | O_TRUNC | O_WRONLY, 0644);
        (void)!write(fd, "0\n", 2);
        close(fd);
    }
    pid_t kids[4];
    for (int k = 0; k < 4; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            for (int j = 0; j < 40; j++) {
                bump("c1", 0);
                bump("c2", 1);
            }
            _exit(0);
        }
    }
    for (int k = 0; k < 4; k++) {
        int st;
        waitpid(kids[k], &st, 0);
        if (st != 0)
            printf("child %d status %d\n", k, st);
    }
    printf("fcntl counter %d, flock counter %d\n", counter("c1"), counter("c2"));
    fflush(stdout);

    int fd = open("f", O_CREAT | O_RDWR | O_TRUNC, 0644);
    (void)!write(fd, "0123456789abcdefghij", 20);
    setlk(fd, F_SETLK, F_WRLCK, 0, 10);
    flock(fd, LOCK_EX);
    int to_child[2], to_parent[2];
    if (pipe(to_child) || pipe(to_parent))
        return 1;
    pid_t p = fork();
    if (p == 0) {
        struct flock l = {.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 5, .l_len = 2};
        fcntl(fd, F_GETLK, &l);
        printf("F_GETLK: %s from %ld length %ld, the parent's: %s\n", l.l_type == F_WRLCK ? "write lock" : "none",
               (long)l.l_start, (long)l.l_len, l.l_pid == getppid() ? "yes" : "no");
        int r = setlk(fd, F_SETLK, F_RDLCK, 5, 2);
        printf("F_SETLK over it: %s\n", r ? strerrorname_np(errno) : "granted");
        r = setlk(fd, F_SETLK, F_WRLCK, 10, 10);
        printf("F_SETLK beside it: %s\n", r ? strerrorname_np(errno) : "granted");
        int other = open("f", O_RDWR);
        r = flock(fd, LOCK_EX | LOCK_NB);
        printf("flock of the inherited description: %s\n", r ? strerrorname_np(errno) : "granted");
        r = flock(other, LOCK_SH | LOCK_NB);
        printf("flock of another description: %s\n", r ? strerrorname_np(errno) : "granted");
        r = setlk(other, F_OFD_SETLK, F_WRLCK, 0, 1);
        printf("F_OFD_SETLK over it: %s\n", r ? strerrorname_np(errno) : "granted");
        say(to_parent[1]);
        hear(to_child[0]); /* the parent closed another descriptor of f */
        r = setlk(fd, F_SETLK, F_WRLCK, 0, 10);
        printf("F_SETLK after the parent's close: %s\n", r ? strerrorname_np(errno) : "granted");
        setlk(fd, F_SETLK, F_UNLCK, 0, 0);
        r = setlk(other, F_OFD_SETLK, F_WRLCK, 0, 1);
        printf("F_OFD_SETLK after the parent's close: %s\n", r ? strerrorname_np(errno) : "granted");
        setlk(other, F_OFD_SETLK, F_UNLCK, 0, 1);
        say(to_parent[1]);
        hear(to_child[0]); /* the parent holds a new lock on 0..4 */
        say(to_parent[1]);
        r = setlk(fd, F_SETLKW, F_WRLCK, 2, 1);
        printf("F_SETLKW after the parent's unlock: %s\n", r ? strerrorname_np(errno) : "granted");
        fflush(stdout);
        _exit(0);
    }
    hear(to_parent[0]);
    int again = open("f", O_RDONLY);
    close(again); /* releases every record lock this process has on f */
    say(to_child[1]);
    hear(to_parent[0]);
    struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 5};
    const char *got = fcntl(fd, F_SETLKW, &l) ? strerrorname_np(errno) : "granted";
    say(to_child[1]);
    hear(to_parent[0]);
    setlk(fd, F_SETLK, F_UNLCK, 0, 5);
    int st;
    waitpid(p, &st, 0);
    printf("parent's F_SETLKW after the child's unlock: %s\n", got);
    printf("child status %d\n", st);
    return 0;
}
