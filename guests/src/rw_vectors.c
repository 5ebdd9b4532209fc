/* preadv, pwritev, preadv2 and pwritev2 on a scratch file and a pipe: offsets, the file's own
 * offset, RWF_APPEND, an unknown flag, a negative offset, ESPIPE. Run in a scratch directory. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

static void r(const char *what, ssize_t n) {
    if (n < 0)
        printf("%-40s -1 %s\n", what, strerror(errno));
    else
        printf("%-40s %zd\n", what, n);
}

int main(void) {
    int fd = open("rw_vectors.tmp", O_RDWR | O_CREAT | O_TRUNC, 0644);
    char a[] = "hello ", b[] = "world";
    struct iovec w[2] = {{a, 6}, {b, 5}};
    r("pwritev at 4:", pwritev(fd, w, 2, 4));
    r("  the file's offset:", lseek(fd, 0, SEEK_CUR));
    char x[8] = {0}, y[8] = {0};
    struct iovec rv[2] = {{x, 3}, {y, 7}};
    r("preadv at 4:", preadv(fd, rv, 2, 4));
    printf("  read: \"%s\" \"%s\"\n", x, y);
    r("preadv2 at -1 (the offset):", preadv2(fd, rv, 2, -1, 0));
    r("  the file's offset:", lseek(fd, 0, SEEK_CUR));
    r("pwritev2 RWF_APPEND at 0:", pwritev2(fd, w, 1, 0, RWF_APPEND));
    r("  the file's size:", lseek(fd, 0, SEEK_END));
    r("pwritev2 with an unknown flag:", pwritev2(fd, w, 1, 0, 0x10000));
    r("preadv2 with RWF_NOWAIT:", preadv2(fd, rv, 1, 0, RWF_NOWAIT));
    r("preadv at -2:", preadv(fd, rv, 1, -2));
    r("pwritev at -1:", pwritev(fd, w, 1, -1));
    int p[2];
    pipe(p);
    r("pwritev to a pipe:", pwritev(p[1], w, 1, 0));
    r("pwritev2 to a pipe at -1:", pwritev2(p[1], w, 1, -1, 0));
    r("preadv of a pipe at 0:", preadv(p[0], rv, 1, 0));
    r("preadv2 of a pipe at -1:", preadv2(p[0], rv, 1, -1, 0));
    close(fd);
    unlink("rw_vectors.tmp");
    return 0;
}
