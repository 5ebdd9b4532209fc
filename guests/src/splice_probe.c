// memfd_create, copy_file_range, splice, tee and vmsplice as Linux answers them, in the working
// directory (a fresh scratch directory): a memfd as a file (write, read, pwrite past the end,
// ftruncate, fstat, mmap, /proc/self/fd/N's name and reopening it, seals and what they forbid,
// close-on-exec, a name too long); copy_file_range with and without offsets, past the end,
// overlapping in one file, and its errors; splice from a file into a pipe and from a pipe into
// a file (with and without offsets), pipe to pipe, end of file, SPLICE_F_NONBLOCK and its
// errors; tee leaving the bytes in place; vmsplice both ways; and a thread blocked in splice
// on an empty pipe woken by a writer. Every line is the same natively and under ferrite.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

static void show(const char *what, long r) {
    if (r < 0)
        printf("%s: -1 %s\n", what, strerror(errno));
    else
        printf("%s: %ld\n", what, r);
}

static void show_file(const char *what, int fd) {
    char buf[128];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n < 0)
        n = 0;
    buf[n] = 0;
    printf("%s: \"%s\"\n", what, buf);
}

static void memfd(void) {
    int fd = memfd_create("probe", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    show("memfd_create", fd >= 0 ? 3 : -1);
    printf("  FD_CLOEXEC: %d, F_GETFL & O_ACCMODE: %d\n", fcntl(fd, F_GETFD), fcntl(fd, F_GETFL) & O_ACCMODE);
    char link[128];
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, link, sizeof link - 1);
    link[n < 0 ? 0 : n] = 0;
    printf("  readlink: \"%s\"\n", link);
    show("  write", write(fd, "hello memfd", 11));
    show("  pwrite past the end", pwrite(fd, "!", 1, 15));
    struct stat st;
    fstat(fd, &st);
    printf("  fstat: regular %d, size %ld, links %ld, mode %o\n", S_ISREG(st.st_mode), (long)st.st_size,
           (long)st.st_nlink, st.st_mode & 0777);
    char buf[32] = {0};
    show("  lseek to 0", lseek(fd, 0, SEEK_SET));
    n = read(fd, buf, 5);
    printf("  read: %zd \"%.5s\"\n", n, buf);
    show("  ftruncate to 4096", ftruncate(fd, 4096));
    char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    printf("  mmap shared: %s\n", p == MAP_FAILED ? strerror(errno) : "ok");
    if (p != MAP_FAILED) {
        memcpy(p, "HELLO", 5);
        munmap(p, 4096);
    }
    show_file("  after a store through the mapping", fd);
    int again = open(path, O_RDONLY);
    show("  open(/proc/self/fd/N, O_RDONLY)", again >= 0 ? 0 : -1);
    n = pread(again, buf, 5, 0);
    printf("  read from it: %zd \"%.5s\"\n", n, buf);
    show("  F_ADD_SEALS from a read-only descriptor", fcntl(again, F_ADD_SEALS, F_SEAL_WRITE));
    close(again);
    show("  F_GET_SEALS", fcntl(fd, F_GET_SEALS));
    show("  F_ADD_SEALS(F_SEAL_SHRINK | F_SEAL_GROW)", fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW));
    show("  F_GET_SEALS", fcntl(fd, F_GET_SEALS));
    show("  ftruncate to 10 (sealed)", ftruncate(fd, 10));
    show("  pwrite within", pwrite(fd, "x", 1, 0));
    show("  pwrite past the end (sealed)", pwrite(fd, "x", 1, 5000));
    show("  F_ADD_SEALS(F_SEAL_SEAL)", fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL));
    show("  F_ADD_SEALS(F_SEAL_WRITE) after F_SEAL_SEAL", fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE));
    close(fd);
    int plain = memfd_create("plain", 0);
    printf("memfd_create without flags: FD_CLOEXEC %d\n", fcntl(plain, F_GETFD));
    show("  F_GET_SEALS without MFD_ALLOW_SEALING", fcntl(plain, F_GET_SEALS));
    show("  F_ADD_SEALS without MFD_ALLOW_SEALING", fcntl(plain, F_ADD_SEALS, F_SEAL_WRITE));
    close(plain);
    char longname[300];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    show("memfd_create with a 299-byte name", memfd_create(longname, 0));
    longname[249] = 0;
    int ok = memfd_create(longname, 0);
    show("memfd_create with a 249-byte name", ok >= 0 ? 0 : -1);
    close(ok);
    show("memfd_create with an unknown flag", memfd_create("x", 0x100));
    show("memfd_create with a bad name pointer", memfd_create((const char *)16, 0));
    int fdf = open("plain_file", O_RDWR | O_CREAT | O_TRUNC, 0644);
    show("F_GET_SEALS of a file in the directory", fcntl(fdf, F_GET_SEALS) >= 0 ? 0 : -1);
    close(fdf);
}

static void copy_range(void) {
    int a = open("cfr_a", O_RDWR | O_CREAT | O_TRUNC, 0644);
    int b = open("cfr_b", O_RDWR | O_CREAT | O_TRUNC, 0644);
    write(a, "0123456789abcdefghij", 20);
    lseek(a, 0, SEEK_SET);
    show("copy_file_range 8 at the offsets", copy_file_range(a, NULL, b, NULL, 8, 0));
    printf("  offsets after: in %ld out %ld\n", (long)lseek(a, 0, SEEK_CUR), (long)lseek(b, 0, SEEK_CUR));
    loff_t oi = 15, oo = 2;
    show("copy_file_range 100 from offset 15 to 2", copy_file_range(a, &oi, b, &oo, 100, 0));
    printf("  offsets after: *in %ld *out %ld, in %ld out %ld\n", (long)oi, (long)oo, (long)lseek(a, 0, SEEK_CUR),
           (long)lseek(b, 0, SEEK_CUR));
    show_file("  the copy", b);
    oi = 20;
    show("copy_file_range at the end of the input", copy_file_range(a, &oi, b, NULL, 5, 0));
    show("copy_file_range of 0 bytes", copy_file_range(a, NULL, b, NULL, 0, 0));
    oi = 0, oo = 4;
    show("copy_file_range overlapping in one file", copy_file_range(a, &oi, a, &oo, 8, 0));
    oi = 0, oo = 10;
    show("copy_file_range within one file, apart", copy_file_range(a, &oi, a, &oo, 8, 0));
    show_file("  the file", a);
    show("copy_file_range with flags", copy_file_range(a, NULL, b, NULL, 4, 1));
    show("copy_file_range from a closed descriptor", copy_file_range(99, NULL, b, NULL, 4, 0));
    int ro = open("cfr_b", O_RDONLY);
    show("copy_file_range to a read-only descriptor", copy_file_range(a, NULL, ro, NULL, 4, 0));
    int ap = open("cfr_b", O_WRONLY | O_APPEND);
    show("copy_file_range to an O_APPEND descriptor", copy_file_range(a, NULL, ap, NULL, 4, 0));
    int p[2];
    pipe(p);
    show("copy_file_range to a pipe", copy_file_range(a, NULL, p[1], NULL, 4, 0));
    int dir = open(".", O_RDONLY | O_DIRECTORY);
    show("copy_file_range from a directory", copy_file_range(dir, NULL, b, NULL, 4, 0));
    oi = -1;
    show("copy_file_range from a negative offset", copy_file_range(a, &oi, b, NULL, 4, 0));
    int m = memfd_create("dst", 0);
    show("copy_file_range to a memfd", copy_file_range(a, NULL, m, NULL, 6, 0));
    int m2 = memfd_create("dst2", 0);
    write(m2, "memfd to memfd", 14);
    oi = 0;
    show("copy_file_range memfd -> memfd", copy_file_range(m2, &oi, m, NULL, 14, 0));
    show_file("  the memfd", m);
    close(m2);
    close(m);
    close(dir);
    close(p[0]);
    close(p[1]);
    close(ro);
    close(ap);
    close(a);
    close(b);
}

static int blocked_pipe[2], blocked_out[2];
static void *splicer(void *arg) {
    long n = splice(blocked_pipe[0], NULL, blocked_out[1], NULL, 64, 0);
    return (void *)n;
}

static void splices(void) {
    int f = open("sp_in", O_RDWR | O_CREAT | O_TRUNC, 0644);
    write(f, "spliced from a file", 19);
    lseek(f, 0, SEEK_SET);
    int p[2], q[2];
    pipe(p);
    pipe(q);
    show("splice file -> pipe, 7", splice(f, NULL, p[1], NULL, 7, 0));
    printf("  file offset after: %ld\n", (long)lseek(f, 0, SEEK_CUR));
    loff_t off = 13;
    show("splice file@13 -> pipe, 100", splice(f, &off, p[1], NULL, 100, 0));
    printf("  *off after: %ld, file offset %ld\n", (long)off, (long)lseek(f, 0, SEEK_CUR));
    show("tee pipe -> pipe, 100", tee(p[0], q[1], 100, 0));
    int g = open("sp_out", O_RDWR | O_CREAT | O_TRUNC, 0644);
    show("splice pipe -> file, 5", splice(p[0], NULL, g, NULL, 5, 0));
    loff_t goff = 20;
    show("splice pipe -> file@20, 100", splice(p[0], NULL, g, &goff, 100, 0));
    printf("  *off after: %ld, file offset %ld\n", (long)goff, (long)lseek(g, 0, SEEK_CUR));
    char buf[64] = {0};
    ssize_t n = pread(g, buf, sizeof buf, 0);
    for (ssize_t i = 0; i < n; i++)
        if (buf[i] == 0)
            buf[i] = '.';
    printf("  the file: %zd \"%.*s\"\n", n, (int)n, buf);
    show("splice from the empty pipe, SPLICE_F_NONBLOCK", splice(p[0], NULL, g, NULL, 10, SPLICE_F_NONBLOCK));
    int r[2];
    pipe(r);
    show("splice pipe -> pipe (the tee'd bytes), 4", splice(q[0], NULL, r[1], NULL, 4, 0));
    n = read(r[0], buf, sizeof buf);
    printf("  read: %zd \"%.*s\"\n", n, (int)n, buf);
    n = read(q[0], buf, sizeof buf);
    printf("  left in the tee'd pipe: %zd \"%.*s\"\n", n, (int)n, buf);
    show("splice of 0 bytes", splice(42, NULL, 43, NULL, 0, 0));
    show("splice with unknown flags", splice(p[0], NULL, g, NULL, 1, 0x100));
    show("splice file -> file", splice(f, NULL, g, NULL, 1, 0));
    show("splice with an offset for a pipe", splice(p[0], &off, g, NULL, 1, 0));
    show("splice from a pipe's write end", splice(p[1], NULL, g, NULL, 1, 0));
    show("splice pipe -> itself", splice(p[0], NULL, p[1], NULL, 1, SPLICE_F_NONBLOCK));
    int ap = open("sp_out", O_WRONLY | O_APPEND);
    write(p[1], "z", 1);
    show("splice pipe -> O_APPEND file", splice(p[0], NULL, ap, NULL, 1, 0));
    close(ap);
    show("tee of one pipe to itself", tee(p[0], p[1], 1, 0));
    show("tee pipe -> file", tee(p[0], g, 1, 0));
    show("splice from a closed descriptor", splice(99, NULL, p[1], NULL, 1, 0));
    // A full pipe: SPLICE_F_NONBLOCK gives EAGAIN.
    int full[2];
    pipe2(full, O_NONBLOCK);
    char chunk[4096];
    memset(chunk, 'f', sizeof chunk);
    while (write(full[1], chunk, sizeof chunk) > 0) {
    }
    lseek(f, 0, SEEK_SET);
    show("splice file -> full pipe, SPLICE_F_NONBLOCK", splice(f, NULL, full[1], NULL, 4, SPLICE_F_NONBLOCK));
    close(full[0]);
    show("splice file -> pipe without readers", splice(f, NULL, full[1], NULL, 4, 0));
    close(full[1]);
    // End of file: no writer left.
    close(p[1]);
    show("splice from a pipe without writers", splice(p[0], NULL, g, NULL, 10, 0));
    // vmsplice both ways.
    int v[2];
    pipe(v);
    struct iovec iov[2] = {{"vm", 2}, {"splice", 6}};
    show("vmsplice into a pipe", vmsplice(v[1], iov, 2, 0));
    char x[3] = {0}, y[10] = {0};
    struct iovec out[2] = {{x, 3}, {y, 10}};
    show("vmsplice out of a pipe", vmsplice(v[0], out, 2, 0));
    printf("  buffers: \"%.3s\" \"%s\"\n", x, y);
    show("vmsplice out of the empty pipe, SPLICE_F_NONBLOCK", vmsplice(v[0], out, 2, SPLICE_F_NONBLOCK));
    show("vmsplice to a file", vmsplice(g, iov, 2, 0));
    show("vmsplice with 0 buffers", vmsplice(v[1], iov, 0, 0));
    // A thread blocked in splice on an empty pipe, woken by a write.
    pipe(blocked_pipe);
    pipe(blocked_out);
    pthread_t t;
    pthread_create(&t, NULL, splicer, NULL);
    usleep(20000);
    write(blocked_pipe[1], "late", 4);
    void *res;
    pthread_join(t, &res);
    n = read(blocked_out[0], buf, sizeof buf);
    printf("the blocked splice moved %ld bytes: \"%.*s\"\n", (long)res, (int)n, buf);
    close(f);
    close(g);
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    signal(SIGPIPE, SIG_IGN);
    memfd();
    copy_range();
    splices();
    printf("splice_probe done\n");
    return 0;
}
