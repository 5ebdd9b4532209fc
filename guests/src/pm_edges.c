/* pm_edges: what a PM programmer does wrong or strangely with a pool file, each case printing
 * what Linux answered (return values, errno names, SIGBUS, the bytes read back).  Run natively
 * on a directory of a plain file system and under ferrite on the PM mount, the output is the
 * same except where docs/pm-model.md ("Pool files: edge cases") says the PM mount differs
 * (MAP_SYNC).
 * Usage: pm_edges DIR CASE      CASE is one of the names in `cases` below; exits 0.
 * DIR must be empty of the names a case makes (pool, fifo, sub, link). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef MAP_SHARED_VALIDATE
#define MAP_SHARED_VALIDATE 0x03
#endif
#ifndef MAP_SYNC
#define MAP_SYNC 0x80000
#endif

static char path[4096];
static sigjmp_buf jb;
static void on_bus(int s)
{
    (void)s;
    siglongjmp(jb, 1);
}

static const char *err(int e)
{
    switch (e) {
    case 0: return "ok";
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case EISDIR: return "EISDIR";
    case ENODEV: return "ENODEV";
    case EINVAL: return "EINVAL";
    case ENOMEM: return "ENOMEM";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    case EBADF: return "EBADF";
    case ENOENT: return "ENOENT";
    case EFBIG: return "EFBIG";
    case ENXIO: return "ENXIO";
    case EROFS: return "EROFS";
    case EXDEV: return "EXDEV";
    case ETXTBSY: return "ETXTBSY";
    case EOVERFLOW: return "EOVERFLOW";
    case EFAULT: return "EFAULT";
    default: return "other";
    }
}

/* Reads p[off]: the byte, or -1 when it raised SIGBUS. */
static int load(volatile char *p, size_t off)
{
    if (sigsetjmp(jb, 1) == 0)
        return (unsigned char)p[off];
    return -1;
}

/* Stores c at p[off]: 0, or -1 when it raised SIGBUS. */
static int store(volatile char *p, size_t off, char c)
{
    if (sigsetjmp(jb, 1) == 0) {
        p[off] = c;
        return 0;
    }
    return -1;
}

static int make(const char *name, off_t size)
{
    snprintf(path, sizeof path, "%s", name);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, size) != 0) {
        printf("setup %s: %s\n", name, err(errno));
        exit(0);
    }
    return fd;
}

static char *map(int fd, size_t len, int prot, int flags, off_t off, const char *what)
{
    errno = 0;
    char *p = mmap(NULL, len, prot, flags, fd, off);
    printf("mmap %s: %s\n", what, p == MAP_FAILED ? err(errno) : "ok");
    return p == MAP_FAILED ? NULL : p;
}

static long file_size(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 ? (long)st.st_size : -1;
}

/* The byte at offset off of the file, read with pread (-1 past the end). */
static int file_byte(int fd, off_t off)
{
    unsigned char c;
    return pread(fd, &c, 1, off) == 1 ? c : -1;
}

static void c_empty(void)
{
    int fd = make("pool", 0);
    char *p = map(fd, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, 0, "4 KiB of an empty file");
    if (p)
        printf("load [0]: %d, store [0]: %d\n", load(p, 0), store(p, 0, 'a'));
    errno = 0;
    p = mmap(NULL, 0, PROT_READ, MAP_SHARED, fd, 0);
    printf("mmap 0 bytes: %s\n", p == MAP_FAILED ? err(errno) : "ok");
}

static void c_small(off_t size)
{
    int fd = make("pool", size);
    char *p = map(fd, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, 0, "8 KiB");
    if (!p)
        return;
    size_t last = size > 0 ? (size_t)size - 1 : 0;
    printf("store [size-1]: %d, [size]: %d, [4095]: %d, [4096]: %d\n", store(p, last, 'a'),
           store(p, (size_t)size, 'b'), store(p, 4095, 'c'), store(p, 4096, 'd'));
    printf("load [size]: %d, [4095]: %d\n", load(p, (size_t)size), load(p, 4095));
    printf("msync: %s\n", msync(p, 8192, MS_SYNC) == 0 ? "ok" : err(errno));
    printf("file: size %ld, [size-1] %d, [size] %d\n", file_size(fd), file_byte(fd, (off_t)last),
           file_byte(fd, size));
    /* Growing the file shows what the page past the old end held: Linux zeroes the tail of a
     * file's last page when it writes the page back, but the page cache keeps the stores until
     * then, so a grown file reads them (or zeros after writeback).  Both are allowed; print
     * only whether it is one of the two. */
    if (ftruncate(fd, 8192) == 0) {
        int b = file_byte(fd, size);
        printf("grown: [size] is %s, [4096] now %d\n", b == 'b' || b == 0 ? "b or 0" : "other",
               load(p, 4096));
    }
}

static void c_sparse(void)
{
    int fd = make("pool", (off_t)1 << 40);
    printf("size %ld\n", file_size(fd));
    char *p = map(fd, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, (off_t)1 << 39, "1 MiB at 512 GiB");
    if (p) {
        p[5] = 'x';
        printf("msync: %s\n", msync(p, 4096, MS_SYNC) == 0 ? "ok" : err(errno));
        printf("file [512 GiB + 5]: %d\n", file_byte(fd, ((off_t)1 << 39) + 5));
    }
    char *q = map(fd, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, ((off_t)1 << 40) - 4096, "the last page");
    if (q) {
        q[4095] = 'z';
        msync(q, 4096, MS_SYNC);
        printf("file [1 TiB - 1]: %d\n", file_byte(fd, ((off_t)1 << 40) - 1));
    }
}

/* A pool past 1 TiB: its pages at 1 TiB and beyond are other bytes than those at 0. */
static void c_huge(void)
{
    int fd = make("pool", (off_t)3 << 40);
    char *a = map(fd, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, 0, "page 0");
    char *b = map(fd, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, (off_t)1 << 40, "page at 1 TiB");
    char *c = map(fd, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, (off_t)2 << 40, "page at 2 TiB");
    if (!a || !b || !c)
        return;
    a[0] = 'A';
    b[0] = 'B';
    c[0] = 'C';
    printf("a[0] %c, b[0] %c, c[0] %c\n", a[0], b[0], c[0]);
    msync(a, 4096, MS_SYNC);
    msync(b, 4096, MS_SYNC);
    msync(c, 4096, MS_SYNC);
    printf("file [0] %c, [1 TiB] %c, [2 TiB] %c\n", file_byte(fd, 0), file_byte(fd, (off_t)1 << 40),
           file_byte(fd, (off_t)2 << 40));
    /* A second pool: its page 0 must not be the first pool's page at 1 TiB. */
    int fd2 = open("pool2", O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd2 < 0 || ftruncate(fd2, 4096) != 0)
        return;
    char *d = map(fd2, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, 0, "pool2 page 0");
    if (d) {
        d[0] = 'D';
        msync(d, 4096, MS_SYNC);
        printf("pool2 [0] %c, pool [1 TiB] %c\n", file_byte(fd2, 0), file_byte(fd, (off_t)1 << 40));
    }
}

static void c_bigmap(void)
{
    int fd = make("pool", (off_t)16 << 30);
    char *p = map(fd, (size_t)16 << 30, PROT_READ | PROT_WRITE, MAP_SHARED, 0, "16 GiB");
    if (p) {
        p[(size_t)15 << 30] = 'x';
        printf("load: %c\n", p[(size_t)15 << 30]);
    }
}

static void c_readonly(void)
{
    int fd = make("pool", 4096);
    pwrite(fd, "r", 1, 0);
    close(fd);
    /* A pool opened read-only and mapped for reading (a checker, a read-only recovery). */
    fd = open("pool", O_RDONLY);
    char *r = map(fd, 4096, PROT_READ, MAP_SHARED, 0, "read-only shared of O_RDONLY (0644)");
    if (r) {
        printf("[0] %c\n", r[0]);
        /* Moved, it is the same mapping: still no PROT_WRITE for a file opened read-only. */
        void *hole = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        char *m = mremap(r, 4096, 4096, MREMAP_MAYMOVE | MREMAP_FIXED, hole);
        if (m == MAP_FAILED) {
            printf("mremap: %s\n", err(errno));
        } else {
            errno = 0;
            printf("moved [0] %c, mprotect PROT_WRITE: %s\n", m[0],
                   mprotect(m, 4096, PROT_READ | PROT_WRITE) == 0 ? "ok" : err(errno));
        }
    }
    close(fd);
}

/* The same pool made read-only for its owner: what an unprivileged owner is refused. */
static void c_perm444(void)
{
    int fd = make("pool", 4096);
    close(fd);
    chmod("pool", 0444);
    errno = 0;
    fd = open("pool", O_RDWR);
    printf("open O_RDWR of 0444: %s\n", fd < 0 ? err(errno) : "ok");
    if (fd >= 0)
        close(fd);
    fd = open("pool", O_RDONLY);
    char *p = map(fd, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, 0, "read-write shared of O_RDONLY");
    p = map(fd, 4096, PROT_READ, MAP_SHARED, 0, "read-only shared");
    if (p) {
        errno = 0;
        printf("mprotect PROT_WRITE: %s\n", mprotect(p, 4096, PROT_READ | PROT_WRITE) == 0 ? "ok" : err(errno));
    }
    p = map(fd, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, 0, "read-write private of O_RDONLY");
    if (p) {
        p[0] = 'x';
        printf("private store: %c, file [0] %d\n", p[0], file_byte(fd, 0));
    }
}

static void c_dir(void)
{
    mkdir("sub", 0755);
    errno = 0;
    int fd = open("sub", O_RDWR);
    printf("open O_RDWR of a directory: %s\n", fd < 0 ? err(errno) : "ok");
    fd = open("sub", O_RDONLY);
    map(fd, 4096, PROT_READ, MAP_SHARED, 0, "a directory");
}

static void c_fifo(void)
{
    errno = 0;
    printf("mkfifo: %s\n", mkfifo("fifo", 0644) == 0 ? "ok" : err(errno));
    int fd = open("fifo", O_RDWR);
    printf("open O_RDWR: %s\n", fd < 0 ? err(errno) : "ok");
    if (fd >= 0) {
        map(fd, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, 0, "a FIFO");
        errno = 0;
        printf("ftruncate: %s\n", ftruncate(fd, 4096) == 0 ? "ok" : err(errno));
    }
}

static void c_mapsync(void)
{
    int fd = make("pool", 4096);
    char *p = map(fd, 4096, PROT_READ | PROT_WRITE, MAP_SHARED_VALIDATE | MAP_SYNC, 0, "MAP_SHARED_VALIDATE|MAP_SYNC");
    if (p) {
        p[0] = 'x';
        printf("store: ok\n");
    }
    map(fd, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_SYNC, 0, "MAP_SHARED|MAP_SYNC (ignored flag)");
    map(fd, 4096, PROT_READ | PROT_WRITE, MAP_SHARED_VALIDATE, 0, "MAP_SHARED_VALIDATE");
    map(fd, 4096, PROT_READ | PROT_WRITE, MAP_SHARED_VALIDATE | 0x40000000, 0, "MAP_SHARED_VALIDATE|unknown flag");
    map(fd, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_SYNC, 0, "MAP_PRIVATE|MAP_SYNC (ignored flag)");
}

static void c_private(void)
{
    int fd = make("pool", 4096);
    char *s = map(fd, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, 0, "shared");
    char *p = map(fd, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, 0, "private");
    if (!s || !p)
        return;
    s[0] = 'S';
    printf("private sees the shared store before its own: %c\n", p[0]);
    p[0] = 'P';
    s[1] = 'T';
    msync(s, 4096, MS_SYNC);
    printf("private [0] %c [1] %d, shared [0] %c, file [0] %c\n", p[0], p[1], s[0], file_byte(fd, 0));
}

static void c_mremap(void)
{
    int fd = make("pool", 16384);
    char *p = map(fd, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, 0, "4 KiB");
    if (!p)
        return;
    p[0] = 'a';
    /* Keep the next page busy so that growing must move. */
    char *block = mmap(p + 4096, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    errno = 0;
    char *q = mremap(p, 4096, 8192, 0);
    printf("mremap grow in place (blocked): %s\n", q == MAP_FAILED ? err(errno) : (block == MAP_FAILED ? "ok (not blocked)" : "ok"));
    q = mremap(p, 4096, 12288, MREMAP_MAYMOVE);
    printf("mremap grow, may move: %s, moved %d\n", q == MAP_FAILED ? err(errno) : "ok", q != p);
    if (q == MAP_FAILED)
        return;
    printf("q[0] %c\n", q[0]);
    q[8192] = 'c';
    msync(q, 12288, MS_SYNC);
    printf("file [0] %c, [8192] %c\n", file_byte(fd, 0), file_byte(fd, 8192));
    /* Move it to a fixed place, then shrink it. */
    char *dst = mmap(NULL, 65536, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *r = mremap(q, 12288, 12288, MREMAP_MAYMOVE | MREMAP_FIXED, dst + 16384);
    printf("mremap fixed: %s, at dst %d\n", r == MAP_FAILED ? err(errno) : "ok", r == dst + 16384);
    if (r == MAP_FAILED)
        return;
    r[4096] = 'b';
    msync(r, 12288, MS_SYNC);
    r = mremap(r, 12288, 4096, 0);
    printf("mremap shrink: %s\n", r == MAP_FAILED ? err(errno) : "ok");
    msync(r, 4096, MS_SYNC);
    printf("file [4096] %c\n", file_byte(fd, 4096));
    /* MREMAP_DONTUNMAP is for private anonymous mappings only before Linux 5.13; since, any. */
}

static void c_dontneed(void)
{
    int fd = make("pool", 8192);
    char *p = map(fd, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, 0, "8 KiB");
    if (!p)
        return;
    p[0] = 'x';
    p[4096] = 'y';
    errno = 0;
    printf("madvise DONTNEED: %s\n", madvise(p, 4096, MADV_DONTNEED) == 0 ? "ok" : err(errno));
    printf("after: [0] %c\n", p[0]);
    errno = 0;
    printf("madvise REMOVE: %s\n", madvise(p + 4096, 4096, MADV_REMOVE) == 0 ? "ok" : err(errno));
    printf("after: [4096] %d, file [4096] %d\n", p[4096], file_byte(fd, 4096));
    p[1] = 'w';
    errno = 0;
    printf("fallocate PUNCH_HOLE: %s\n",
           fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096) == 0 ? "ok" : err(errno));
    printf("after: [0] %d [1] %d, file [1] %d, size %ld\n", p[0], p[1], file_byte(fd, 1), file_size(fd));
    errno = 0;
    printf("fallocate ZERO_RANGE: %s\n", fallocate(fd, FALLOC_FL_ZERO_RANGE, 100, 8000) == 0 ? "ok" : err(errno));
    p[10] = 'q';
    printf("fallocate grow: %s\n", fallocate(fd, 0, 0, 16384) == 0 ? "ok" : err(errno));
    printf("size %ld, [10] %c\n", file_size(fd), p[10]);
    msync(p, 8192, MS_SYNC);
}

static void c_truncate(void)
{
    int fd = make("pool", 12288);
    char *p = map(fd, 12288, PROT_READ | PROT_WRITE, MAP_SHARED, 0, "12 KiB");
    if (!p)
        return;
    p[0] = 'a';
    p[8192] = 'c';
    ftruncate(fd, 4096);
    printf("shrunk: [0] %c, [8192] %d\n", p[0], load(p, 8192));
    ftruncate(fd, 12288);
    printf("grown: [8192] %d\n", load(p, 8192));
    p[8192] = 'C';
    printf("written: [8192] %c, file [8192] %c\n", p[8192], file_byte(fd, 8192));
    errno = 0;
    printf("truncate by path to 0: %s\n", truncate("pool", 0) == 0 ? "ok" : err(errno));
    printf("[0] %d\n", load(p, 0));
}

static void c_write(void)
{
    int fd = make("pool", 4096);
    char *p = map(fd, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, 0, "4 KiB");
    if (!p)
        return;
    p[0] = 'm';
    printf("pwrite: %zd\n", pwrite(fd, "wx", 2, 1));
    printf("mapping sees: %c%c%c\n", p[0], p[1], p[2]);
    p[1] = 'M';
    char b[3] = {0};
    printf("pread: %zd %.3s\n", pread(fd, b, 3, 0), b);
    lseek(fd, 4090, SEEK_SET);
    printf("write past the end: %zd, size %ld, [4095] %c\n", write(fd, "0123456789", 10), file_size(fd), p[4095]);
    printf("msync: %s, fsync: %s, fdatasync: %s\n", msync(p, 4096, MS_SYNC) == 0 ? "ok" : err(errno),
           fsync(fd) == 0 ? "ok" : err(errno), fdatasync(fd) == 0 ? "ok" : err(errno));
    errno = 0;
    printf("msync MS_ASYNC|MS_INVALIDATE: %s\n", msync(p, 4096, MS_ASYNC | MS_INVALIDATE) == 0 ? "ok" : err(errno));
    errno = 0;
    printf("msync unaligned: %s\n", msync(p + 1, 10, MS_SYNC) == 0 ? "ok" : err(errno));
    errno = 0;
    printf("msync MS_SYNC|MS_ASYNC: %s\n", msync(p, 4096, MS_SYNC | MS_ASYNC) == 0 ? "ok" : err(errno));
    errno = 0;
    printf("msync unmapped: %s\n", msync(p + (1 << 30), 4096, MS_SYNC) == 0 ? "ok" : err(errno));
}

static void c_twice(void)
{
    int fd = make("pool", 4096);
    char *a = map(fd, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, 0, "first");
    char *b = map(fd, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, 0, "second");
    if (!a || !b)
        return;
    a[0] = 'a';
    b[1] = 'b';
    msync(a, 4096, MS_SYNC);
    printf("a: %c%c, b: %c%c, distinct %d\n", a[0], a[1], b[0], b[1], a != b);
    pid_t pid = fork();
    if (pid == 0) {
        int fd2 = open("pool", O_RDWR);
        char *c = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd2, 0);
        c[2] = 'c';
        msync(c, 4096, MS_SYNC);
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    printf("after the child: %c%c%c, file [2] %c\n", a[0], a[1], a[2], file_byte(fd, 2));
}

static void c_symlink(const char *target)
{
    int t = open(target, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (t < 0 || ftruncate(t, 4096) != 0) {
        printf("setup target: %s\n", err(errno));
        return;
    }
    close(t);
    errno = 0;
    printf("symlink: %s\n", symlink(target, "link") == 0 ? "ok" : err(errno));
    int fd = open("link", O_RDWR);
    printf("open through it: %s\n", fd < 0 ? err(errno) : "ok");
    if (fd < 0)
        return;
    char *p = map(fd, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, 0, "through the link");
    if (p) {
        p[0] = 'L';
        msync(p, 4096, MS_SYNC);
        printf("target [0] %c\n", file_byte(fd, 0));
    }
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: pm_edges DIR CASE\n");
        return 2;
    }
    if (chdir(argv[1]) != 0) {
        perror(argv[1]);
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_bus;
    sigaction(SIGBUS, &sa, NULL);
    setvbuf(stdout, NULL, _IONBF, 0);
    const char *c = argv[2];
    if (!strcmp(c, "empty")) c_empty();
    else if (!strcmp(c, "onebyte")) c_small(1);
    else if (!strcmp(c, "odd")) c_small(5000);
    else if (!strcmp(c, "sparse")) c_sparse();
    else if (!strcmp(c, "huge")) c_huge();
    else if (!strcmp(c, "bigmap")) c_bigmap();
    else if (!strcmp(c, "readonly")) c_readonly();
    else if (!strcmp(c, "perm444")) c_perm444();
    else if (!strcmp(c, "dir")) c_dir();
    else if (!strcmp(c, "fifo")) c_fifo();
    else if (!strcmp(c, "mapsync")) c_mapsync();
    else if (!strcmp(c, "private")) c_private();
    else if (!strcmp(c, "mremap")) c_mremap();
    else if (!strcmp(c, "dontneed")) c_dontneed();
    else if (!strcmp(c, "truncate")) c_truncate();
    else if (!strcmp(c, "write")) c_write();
    else if (!strcmp(c, "twice")) c_twice();
    else if (!strcmp(c, "symlink")) c_symlink(argc > 3 ? argv[3] : "/tmp/pm_edges_target");
    else {
        fprintf(stderr, "pm_edges: unknown case %s\n", c);
        return 2;
    }
    return 0;
}
