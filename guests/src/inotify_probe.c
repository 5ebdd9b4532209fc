/* inotify for changes the program makes itself, as Linux reports them: watches on a directory
 * and on files in it (IN_CREATE, IN_OPEN, IN_MODIFY merged when repeated, IN_CLOSE_WRITE and
 * IN_CLOSE_NOWRITE, IN_ACCESS, IN_ATTRIB from chmod and utimensat, IN_MOVED_FROM/IN_MOVED_TO with
 * one cookie, a rename over a watched file, IN_DELETE, IN_DELETE_SELF and IN_IGNORED, IN_ISDIR,
 * IN_ONESHOT), the directory's watch before the file's; inotify_add_watch's answers (the same
 * descriptor for the same file, IN_MASK_ADD, IN_MASK_CREATE, IN_ONLYDIR and the errors),
 * inotify_rm_watch, poll readiness, FIONREAD, a read buffer too small, IN_NONBLOCK, and a thread
 * blocked in read woken by a change. Cookies and descriptor numbers are printed only as
 * relations, so the output is the same natively and under ferrite. Run in an empty directory. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHOW(label, expr)                                                                      \
    do {                                                                                       \
        long r_ = (expr);                                                                      \
        int e_ = errno;                                                                        \
        printf("%s: %ld%s%s\n", label, r_, r_ < 0 ? " " : "", r_ < 0 ? strerror(e_) : "");   \
    } while (0)

static int wds[8];
static const char *wnames[8];
static int nw;
static unsigned last_cookie;

static const char *wname(int wd) {
    for (int i = 0; i < nw; i++)
        if (wds[i] == wd)
            return wnames[i];
    return "?";
}

static void masks(unsigned m) {
    static const struct { unsigned bit; const char *name; } names[] = {
        {IN_ACCESS, "ACCESS"}, {IN_MODIFY, "MODIFY"}, {IN_ATTRIB, "ATTRIB"}, {IN_CLOSE_WRITE, "CLOSE_WRITE"},
        {IN_CLOSE_NOWRITE, "CLOSE_NOWRITE"}, {IN_OPEN, "OPEN"}, {IN_MOVED_FROM, "MOVED_FROM"},
        {IN_MOVED_TO, "MOVED_TO"}, {IN_CREATE, "CREATE"}, {IN_DELETE, "DELETE"}, {IN_DELETE_SELF, "DELETE_SELF"},
        {IN_MOVE_SELF, "MOVE_SELF"}, {IN_Q_OVERFLOW, "Q_OVERFLOW"}, {IN_IGNORED, "IGNORED"}, {IN_ISDIR, "ISDIR"}};
    const char *sep = "";
    for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++)
        if (m & names[i].bit) {
            printf("%s%s", sep, names[i].name);
            sep = "|";
        }
}

/* Reads and prints every queued event. */
static void drain(int fd, const char *what) {
    char buf[4096] __attribute__((aligned(8)));
    printf("%s:\n", what);
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) {
            if (n < 0 && errno != EAGAIN)
                printf("  read: %s\n", strerror(errno));
            break;
        }
        for (char *p = buf; p < buf + n;) {
            struct inotify_event *e = (struct inotify_event *)p;
            printf("  %s ", wname(e->wd));
            masks(e->mask);
            if (e->len)
                printf(" \"%s\" (len %u)", e->name, e->len);
            if (e->cookie) {
                printf(" cookie %s", e->cookie == last_cookie ? "same as the last" : "new");
                last_cookie = e->cookie;
            }
            printf("\n");
            p += sizeof *e + e->len;
        }
    }
}

static int watch(int fd, const char *path, unsigned mask, const char *name) {
    int wd = inotify_add_watch(fd, path, mask);
    if (wd >= 0) {
        wds[nw] = wd;
        wnames[nw++] = name;
    }
    return wd;
}

static int blocking;

static void *reader(void *arg) {
    char buf[256] __attribute__((aligned(8)));
    ssize_t n = read(blocking, buf, sizeof buf);
    struct inotify_event *e = (struct inotify_event *)buf;
    printf("the blocked reader got %zd bytes: ", n);
    masks(e->mask);
    printf(" \"%s\"\n", e->name);
    return NULL;
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    char small[8];
    SHOW("read with nothing queued", read(in, small, sizeof small));
    mkdir("d", 0755);
    int dw = watch(in, "d", IN_ALL_EVENTS, "d");
    printf("the same directory again gives the same descriptor: %s\n",
           inotify_add_watch(in, "d/.", IN_ALL_EVENTS) == dw ? "yes" : "no");
    SHOW("IN_MASK_CREATE on a watched directory", inotify_add_watch(in, "d", IN_CREATE | IN_MASK_CREATE));
    SHOW("IN_MASK_ADD | IN_MASK_CREATE", inotify_add_watch(in, "d", IN_CREATE | IN_MASK_ADD | IN_MASK_CREATE));
    SHOW("an empty mask", inotify_add_watch(in, "d", 0));
    SHOW("a missing path", inotify_add_watch(in, "missing", IN_ALL_EVENTS));
    SHOW("a descriptor that is not inotify", inotify_add_watch(1, "d", IN_ALL_EVENTS));
    SHOW("a closed descriptor", inotify_add_watch(99, "d", IN_ALL_EVENTS));
    SHOW("inotify_rm_watch of an unknown descriptor", inotify_rm_watch(in, 12345));
    SHOW("inotify_init1 with a bad flag", inotify_init1(1));

    int f = open("d/f", O_CREAT | O_WRONLY, 0644);
    write(f, "hello", 5);
    write(f, " world", 6);
    close(f);
    drain(in, "create, two writes, close");

    watch(in, "d/f", IN_ALL_EVENTS, "f");
    SHOW("IN_ONLYDIR on a file", inotify_add_watch(in, "d/f", IN_ALL_EVENTS | IN_ONLYDIR));
    f = open("d/f", O_RDONLY);
    read(f, small, sizeof small);
    close(f);
    chmod("d/f", 0600);
    utimensat(AT_FDCWD, "d/f", NULL, 0);
    struct pollfd p = {.fd = in, .events = POLLIN};
    int ready = poll(&p, 1, 0);
    int queued = 0;
    ioctl(in, FIONREAD, &queued);
    printf("poll: %d (revents %s), FIONREAD: %d bytes\n", ready, p.revents & POLLIN ? "POLLIN" : "-", queued);
    SHOW("a read into 8 bytes", read(in, small, sizeof small));
    drain(in, "open, read, close, chmod, utimensat with both watches");

    f = open("d/a", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    close(f);
    rename("d/a", "d/b");
    rename("d/b", "d/f");
    drain(in, "create a, rename a to b, rename b over the watched f");

    mkdir("d/sub", 0755);
    rmdir("d/sub");
    symlink("f", "d/l");
    link("d/f", "d/f2");
    truncate("d/f2", 2);
    drain(in, "mkdir, rmdir, symlink, link, truncate");

    watch(in, "d/f2", IN_MODIFY | IN_ONESHOT, "f2 (one-shot)");
    f = open("d/f2", O_WRONLY | O_TRUNC);
    write(f, "x", 1);
    close(f);
    drain(in, "a one-shot watch on a truncated and written file");

    unlink("d/l");
    unlink("d/f2");
    unlink("d/f");
    watch(in, "d", IN_DELETE | IN_MASK_ADD, "d");
    drain(in, "unlink l, f2, f");

    inotify_rm_watch(in, dw);
    drain(in, "inotify_rm_watch of the directory");

    mkdir("d/e", 0755);
    watch(in, "d/e", IN_DELETE_SELF, "e");
    rmdir("d/e");
    drain(in, "rmdir of a watched directory");

    blocking = inotify_init();
    watch(blocking, "d", IN_CREATE, "d (blocking)");
    pthread_t t;
    pthread_create(&t, NULL, reader, NULL);
    int g = open("d/late", O_CREAT | O_WRONLY, 0644);
    pthread_join(t, NULL);
    close(g);
    unlink("d/late");
    rmdir("d");
    return 0;
}
