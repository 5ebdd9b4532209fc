/* owner_probe: chown(2) and its family (fchown, lchown, fchownat) as Linux answers the file's
 * owner, and what a chown does to the set-id bits; getrusage(2) and times(2). gzip, bzip2, xz
 * and `cp -a` give their output the input's owner with fchown; gcc and make time themselves with
 * getrusage; bash's `times` builtin calls times. Prints the same natively and under ferrite
 * (the ids it gives are its own, which natively as under ferrite it may give).
 * Usage: owner_probe [--other] (in a scratch directory; --other also chowns to another user's
 * id, which only an unprivileged caller is refused) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/times.h>
#include <unistd.h>

static void show(const char *what, int r)
{
    printf("%s: %s\n", what, r < 0 ? strerror(errno) : "ok");
}

static void mode_of(const char *what, const char *path)
{
    struct stat st;
    if (stat(path, &st) < 0)
        printf("%s: stat %s\n", what, strerror(errno));
    else
        printf("%s: %04o\n", what, st.st_mode & 07777);
}

int main(int argc, char **argv)
{
    uid_t u = getuid();
    gid_t g = getgid();

    int fd = open("f", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    show("chown(f, own ids)", chown("f", u, g));
    show("chown(f, -1, -1)", chown("f", -1, -1));
    show("fchown(fd, own ids)", fchown(fd, u, g));
    show("fchown(fd, -1, own gid)", fchown(fd, -1, g));
    show("chown(missing)", chown("missing", u, g));
    show("fchown(bad fd)", fchown(99, u, g));
    show("fchownat(bad flags)", fchownat(AT_FDCWD, "f", u, g, 0x4));
    show("fchownat(AT_EMPTY_PATH)", fchownat(fd, "", u, g, AT_EMPTY_PATH));
    show("symlink", symlink("f", "l"));
    show("lchown(l)", lchown("l", u, g));
    show("fchownat(l, NOFOLLOW)", fchownat(AT_FDCWD, "l", -1, -1, AT_SYMLINK_NOFOLLOW));
    show("chown(l) follows", chown("l", u, g));
    int p[2];
    show("pipe", pipe(p));
    show("fchown(pipe)", fchown(p[0], u, g));

    /* A chown, even to -1, -1, drops the set-user-ID bit of a file, and its set-group-ID bit
     * when it is group-executable; a directory keeps both. */
    show("chmod 06755", chmod("f", 06755));
    show("chown(-1, -1)", chown("f", -1, -1));
    mode_of("after chown", "f");
    show("chmod 06745", chmod("f", 06745));
    show("fchown(-1, -1)", fchown(fd, -1, -1));
    mode_of("setgid without group x", "f");
    show("mkdir", mkdir("d", 0755));
    show("chmod d 02755", chmod("d", 02755));
    show("chown(d)", chown("d", u, g));
    mode_of("directory", "d");

    if (argc > 1 && !strcmp(argv[1], "--other")) {
        show("chown(f, another uid)", chown("f", u + 1, -1));
        show("chown(f, another gid)", chown("f", -1, g + 1));
        show("fchown(fd, another uid)", fchown(fd, u + 1, g));
    }

    /* getrusage: its own time never goes back; it has memory; no children waited for. */
    struct rusage a, b, c;
    show("getrusage(SELF)", getrusage(RUSAGE_SELF, &a));
    volatile unsigned long x = 0;
    for (unsigned long i = 0; i < 3000000; i++)
        x += i;
    show("getrusage(SELF) again", getrusage(RUSAGE_SELF, &b));
    long ua = a.ru_utime.tv_sec * 1000000L + a.ru_utime.tv_usec;
    long ub = b.ru_utime.tv_sec * 1000000L + b.ru_utime.tv_usec;
    printf("user time does not go back: %s\n", ub >= ua ? "yes" : "NO");
    printf("microseconds below a second: %s\n", b.ru_utime.tv_usec < 1000000 && b.ru_stime.tv_usec < 1000000 ? "yes" : "NO");
    printf("max resident set > 0: %s\n", b.ru_maxrss > 0 ? "yes" : "NO");
    show("getrusage(THREAD)", getrusage(RUSAGE_THREAD, &c));
    show("getrusage(CHILDREN)", getrusage(RUSAGE_CHILDREN, &c));
    printf("children: %ld %ld %ld\n", c.ru_utime.tv_sec + c.ru_utime.tv_usec, c.ru_stime.tv_sec + c.ru_stime.tv_usec,
           c.ru_maxrss);
    show("getrusage(7)", getrusage(7, &c));
    show("getrusage(bad buffer)", getrusage(RUSAGE_SELF, (struct rusage *)8));

    /* times: a clock that does not go back, and the children's times 0. */
    struct tms t;
    clock_t t0 = times(&t);
    clock_t t1 = times(NULL);
    printf("times: %s, clock does not go back: %s\n", t0 == (clock_t)-1 ? strerror(errno) : "ok", t1 >= t0 ? "yes" : "NO");
    printf("times children: %ld %ld\n", (long)t.tms_cutime, (long)t.tms_cstime);
    close(fd);
    return 0;
}
