/* fifo_probe: named pipes (mkfifo, mknod) as Linux has them. A non-blocking open for writing
 * with no reader fails with ENXIO; a blocking open waits for its partner, in either order, and
 * a reader whose writer came and went reads what it wrote, then end of file; a FIFO nobody has
 * open starts empty; mknod makes regular files and refuses devices. Shell scripts use FIFOs
 * (`mkfifo p; producer > p & consumer < p`). Prints the same natively and under ferrite.
 * Usage: fifo_probe (in a scratch directory) */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

static void show(const char *what, long r)
{
    if (r < 0)
        printf("%s: %s\n", what, strerror(errno));
    else
        printf("%s: %ld\n", what, r);
}

/* Reads until end of file and prints what came. */
static void drain(const char *what, int fd)
{
    char buf[64];
    int n = 0, r;
    while ((r = read(fd, buf + n, sizeof buf - 1 - n)) > 0)
        n += r;
    buf[n] = 0;
    printf("%s: \"%s\" then %s\n", what, buf, r == 0 ? "end of file" : strerror(errno));
}

static void child_writes(const char *text, int close_at_once)
{
    int fd = open("p", O_WRONLY);
    if (fd < 0)
        _exit(1);
    write(fd, text, strlen(text));
    if (!close_at_once)
        usleep(1000);
    close(fd);
    _exit(0);
}

int main(void)
{
    show("mkfifo", mkfifo("p", 0640));
    show("mkfifo again", mkfifo("p", 0640));
    struct stat st;
    stat("p", &st);
    printf("is a FIFO: %s, mode %o, size %ld\n", S_ISFIFO(st.st_mode) ? "yes" : "no", st.st_mode & 0777, (long)st.st_size);
    DIR *d = opendir(".");
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strcmp(e->d_name, "p"))
            printf("listed as DT_FIFO: %s\n", e->d_type == DT_FIFO ? "yes" : "no");
    closedir(d);

    show("open(write, nonblock) without a reader", open("p", O_WRONLY | O_NONBLOCK));
    int r = open("p", O_RDONLY | O_NONBLOCK);
    show("open(read, nonblock)", r >= 0 ? 0 : -1);
    show("read without a writer", read(r, (char[8]){ 0 }, 8));
    int w = open("p", O_WRONLY | O_NONBLOCK);
    show("open(write, nonblock) with a reader", w >= 0 ? 0 : -1);
    show("write", write(w, "abc", 3));
    int fl = fcntl(r, F_GETFL);
    fcntl(r, F_SETFL, fl & ~O_NONBLOCK);
    close(w);
    drain("reader", r);
    close(r);

    /* What a FIFO held goes when nobody has it open. */
    r = open("p", O_RDONLY | O_NONBLOCK);
    w = open("p", O_WRONLY | O_NONBLOCK);
    write(w, "lost", 4);
    close(w);
    close(r);
    r = open("p", O_RDONLY | O_NONBLOCK);
    show("read after everyone closed", read(r, (char[8]){ 0 }, 8));
    close(r);

    /* The writer opens first and waits for the reader. */
    pid_t pid = fork();
    if (pid == 0)
        child_writes("writer first", 0);
    usleep(2000);
    r = open("p", O_RDONLY);
    drain("blocking reader", r);
    close(r);
    int status;
    waitpid(pid, &status, 0);
    printf("writer exit: %d\n", WEXITSTATUS(status));

    /* The reader opens first; the writer may write and close before the reader runs again. */
    pid = fork();
    if (pid == 0) {
        usleep(2000);
        child_writes("reader first", 1);
    }
    r = open("p", O_RDONLY);
    drain("reader that waited", r);
    close(r);
    waitpid(pid, &status, 0);
    printf("writer exit: %d\n", WEXITSTATUS(status));

    /* A shell's redirections: `cat p` and `echo ... > p` from two processes. */
    pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", "echo through the shell > p", (char *)0);
        _exit(127);
    }
    r = open("p", O_RDONLY);
    drain("shell writer", r);
    close(r);
    waitpid(pid, &status, 0);

    /* O_RDWR: a reader and a writer at once, never waiting; it reads back what it wrote, a
     * blocking reader's open goes on at once, and a non-blocking writer's finds a reader. */
    char rbuf[64];
    ssize_t n;
    int rw = open("p", O_RDWR);
    printf("open(O_RDWR) with nobody else: %s\n", rw >= 0 ? "ok" : strerror(errno));
    printf("write through it: %zd\n", write(rw, "both ends", 9));
    r = open("p", O_RDONLY);
    printf("open(O_RDONLY) beside it: %s\n", r >= 0 ? "ok" : strerror(errno));
    w = open("p", O_WRONLY | O_NONBLOCK);
    printf("open(O_WRONLY|O_NONBLOCK) beside it: %s\n", w >= 0 ? "ok" : strerror(errno));
    close(w);
    close(r);
    n = read(rw, rbuf, sizeof rbuf);
    printf("read through it: %zd \"%.*s\"\n", n, (int)(n > 0 ? n : 0), rbuf);
    fcntl(rw, F_SETFL, O_NONBLOCK);
    n = read(rw, rbuf, sizeof rbuf);
    printf("read of it empty: %s (no end of file: it is its own writer)\n", n < 0 ? strerror(errno) : "data");
    close(rw);

    show("mknod(regular)", mknod("reg", S_IFREG | 0600, 0));
    show("mknod(type 0)", mknod("reg0", 0600, 0));
    stat("reg0", &st);
    printf("type 0 is a regular file: %s\n", S_ISREG(st.st_mode) ? "yes" : "no");
    show("mknod(fifo)", mknod("p2", S_IFIFO | 0600, 0));
    show("mknod(existing)", mknod("reg", S_IFREG | 0600, 0));
    show("mknod(bad type)", mknod("bad", 0170000, 0));
    show("unlink(p)", unlink("p"));
    return 0;
}
