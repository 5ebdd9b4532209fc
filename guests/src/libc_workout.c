/* libc_workout: a broad tour of (static) glibc.  Everything printed is
 * deterministic: no addresses, times, pids or random values, only derived
 * facts ("time ok: 1").  Creates and removes a scratch directory
 * "ferrite_workout.<pid>" in the current directory (the name is never printed).
 * Exit status 3. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

static int failures;

#define CHECK(cond, what)                                                     \
    do {                                                                      \
        if (!(cond)) {                                                        \
            printf("FAIL: %s\n", what);                                       \
            failures++;                                                       \
        }                                                                     \
    } while (0)

static uint32_t lcg_state = 20240601u;
static uint32_t lcg(void)
{
    lcg_state = lcg_state * 1664525u + 1013904223u;
    return lcg_state >> 1;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static void section(const char *name) { printf("== %s\n", name); }

/* ------------------------------------------------------------------ args/env */
static void test_args(int argc, char **argv)
{
    section("args");
    printf("argc: %d\n", argc);
    printf("argv[0] basename: %s\n", base_name(argv[0]));
    for (int i = 1; i < argc; i++)
        printf("argv[%d]: %s\n", i, argv[i]);
    const char *v = getenv("FERRITE_TEST");
    printf("FERRITE_TEST: %s\n", v ? v : "(unset)");
    printf("getenv(NO_SUCH_VAR_FERRITE): %s\n", getenv("NO_SUCH_VAR_FERRITE") ? "set" : "(unset)");
}

/* ---------------------------------------------------------------------- heap */
static void test_heap(void)
{
    section("heap");
    enum { NBLK = 300 };
    static unsigned char *blk[NBLK];
    static size_t sz[NBLK];
    for (int i = 0; i < NBLK; i++) {
        if (i % 50 == 49)
            sz[i] = 140000 + (size_t)i * 100; /* above the 128 KiB mmap threshold */
        else
            sz[i] = 1 + lcg() % (i < 150 ? 64 : 4096);
        blk[i] = malloc(sz[i]);
        CHECK(blk[i] != NULL, "malloc");
        memset(blk[i], (int)(i & 0xff), sz[i]);
    }
    /* free every third block, then reallocate them with other sizes */
    for (int i = 0; i < NBLK; i += 3) {
        free(blk[i]);
        sz[i] = 1 + lcg() % 1000;
        blk[i] = malloc(sz[i]);
        memset(blk[i], (int)(i & 0xff), sz[i]);
    }
    int bad = 0;
    unsigned long total = 0;
    for (int i = 0; i < NBLK; i++) {
        for (size_t j = 0; j < sz[i]; j++)
            bad += blk[i][j] != (unsigned char)(i & 0xff);
        total += sz[i];
    }
    printf("malloc blocks: %d total bytes: %lu corrupt bytes: %d\n", NBLK, total, bad);
    for (int i = NBLK - 1; i >= 0; i -= 2)
        free(blk[i]);
    for (int i = 0; i < NBLK; i += 2)
        free(blk[i]);

    int *z = calloc(10000, sizeof(int));
    CHECK(z != NULL, "calloc");
    long nz = 0;
    for (int i = 0; i < 10000; i++)
        nz += z[i] != 0;
    printf("calloc nonzero ints: %ld\n", nz);
    free(z);

    /* realloc growth from 16 bytes to 512 KiB, crossing the 128 KiB mmap threshold */
    size_t cap = 16, used = 0;
    unsigned char *buf = malloc(cap);
    int steps = 0;
    while (cap < (1u << 19)) {
        for (; used < cap; used++)
            buf[used] = (unsigned char)(used * 7 + 3);
        cap *= 2;
        buf = realloc(buf, cap);
        CHECK(buf != NULL, "realloc");
        steps++;
        size_t bad2 = 0;
        for (size_t k = 0; k < used; k++)
            bad2 += buf[k] != (unsigned char)(k * 7 + 3);
        CHECK(bad2 == 0, "realloc preserved contents");
    }
    buf = realloc(buf, 100); /* shrink */
    int ok = 1;
    for (size_t k = 0; k < 100; k++)
        ok &= buf[k] == (unsigned char)(k * 7 + 3);
    printf("realloc: %d doublings to %zu bytes, shrink ok: %d\n", steps, cap, ok);
    free(buf);

    void *al = aligned_alloc(4096, 8192);
    printf("aligned_alloc 4096 aligned: %d\n", al != NULL && ((uintptr_t)al & 4095) == 0);
    free(al);
}

/* -------------------------------------------------------------------- floats */
static void test_floats(void)
{
    section("floats");
    double d = 3.14159265358979;
    float f = 2.5f;
    long double ld = 1.0L / 3.0L;
    printf("%%f: %f %f %.3f\n", d, (double)f, -0.000123);
    printf("%%e: %e %.2e %E\n", d, 123456789.0, 0.000123);
    printf("%%g: %g %g %g %g\n", d, 1e20, 1e-5, 100000.0);
    printf("long double: %Lf %.18Lf %Le\n", ld, ld, ld * 1e300L * 1e300L);
    printf("special: %f %f %f\n", INFINITY, -INFINITY, 0.0 * -1.0);
    printf("nan: %s\n", isnan(NAN) ? "nan" : "not nan");
    printf("math: sqrt(2)=%.15f exp(1)=%.15f sin(1)=%.15f pow(2,0.5)=%.15f\n",
           sqrt(2.0), exp(1.0), sin(1.0), pow(2.0, 0.5));
    printf("long double math: %.18Lf\n", sqrtl(2.0L));

    const char *inputs[] = {"3.14159", "-2.5e-3", "1e-300", "0x1p-3", "inf", "-0.0",
                            "  42.75xyz", "1e400", "nanny"};
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
        char *end;
        errno = 0;
        double v = strtod(inputs[i], &end);
        printf("strtod(\"%s\") = %.17g consumed %d erange %d\n", inputs[i], v,
               (int)(end - inputs[i]), errno == ERANGE);
    }
    printf("strtold(\"0.1\") = %.20Lg\n", strtold("0.1", NULL));
    printf("strtof(\"0.1\") = %.10g\n", (double)strtof("0.1", NULL));
    printf("atof/atoi/strtol: %g %d %ld %lu\n", atof("6.25"), atoi("-17"),
           strtol("-0x7f", NULL, 16), strtoul("777", NULL, 8));
}

/* --------------------------------------------------------------------- qsort */
static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static void test_qsort(void)
{
    section("qsort");
    enum { N = 1000 };
    static int a[N];
    long long sum = 0;
    for (int i = 0; i < N; i++) {
        a[i] = (int)(lcg() % 100000) - 50000;
        sum += a[i];
    }
    qsort(a, N, sizeof a[0], cmp_int);
    int sorted = 1;
    long long sum2 = 0;
    for (int i = 0; i < N; i++) {
        sum2 += a[i];
        if (i && a[i - 1] > a[i])
            sorted = 0;
    }
    printf("qsort %d ints: sorted %d sum preserved %d\n", N, sorted, sum == sum2);
    printf("min %d max %d median %d a[100] %d\n", a[0], a[N - 1], a[N / 2], a[100]);
    int key = a[777];
    int *hit = bsearch(&key, a, N, sizeof a[0], cmp_int);
    printf("bsearch found: %d\n", hit != NULL && *hit == key);
}

/* ------------------------------------------------------------------- strings */
static void test_strings(void)
{
    section("strings");
    char buf[256];
    strcpy(buf, "Hello");
    strcat(buf, ", ");
    strncat(buf, "persistent world!!!", 16);
    printf("strcpy/strcat: \"%s\" len %zu\n", buf, strlen(buf));
    printf("strcmp: %d %d %d\n", strcmp("abc", "abd") < 0, strcmp("b", "a") > 0, strcmp("x", "x"));
    printf("strncmp: %d strcasecmp: %d\n", strncmp("abcdef", "abcxyz", 3), strcasecmp("HeLLo", "hello"));
    printf("strchr: %s strrchr: %s\n", strchr(buf, 'o'), strrchr(buf, 'o'));
    printf("strstr: %s\n", strstr(buf, "world"));
    printf("strspn: %zu strcspn: %zu\n", strspn("aaabbbccc", "ab"), strcspn("hello, world", ",;"));
    char *dup = strdup(buf);
    for (char *p = dup; *p; p++)
        if (*p >= 'a' && *p <= 'z')
            *p = (char)(*p - 'a' + 'A');
    printf("strdup+upper: %s\n", dup);
    free(dup);
    char toks[] = "alpha,beta;;gamma,delta";
    char *save, *t;
    int n = 0;
    printf("strtok_r:");
    for (t = strtok_r(toks, ",;", &save); t; t = strtok_r(NULL, ",;", &save), n++)
        printf(" [%s]", t);
    printf(" (%d)\n", n);

    /* memmove with overlap, memcpy, memset, memcmp, memchr on a large buffer
     * (exercises the vectorised ifunc variants). */
    static unsigned char big[70000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (unsigned char)(i % 251);
    memmove(big + 1, big, 40000);
    int ok = big[0] == 0 && big[1] == 0 && big[2] == 1 && big[40000] == (unsigned char)(39999 % 251);
    memmove(big, big + 1, 40000);
    for (size_t i = 0; i < 40000; i++)
        ok &= big[i] == (unsigned char)(i % 251);
    printf("memmove overlap ok: %d\n", ok);
    static unsigned char big2[70000];
    memcpy(big2, big, sizeof big);
    printf("memcpy/memcmp equal: %d\n", memcmp(big, big2, sizeof big) == 0);
    big2[65000] ^= 1;
    printf("memcmp differs: %d\n", memcmp(big, big2, sizeof big) != 0);
    memset(big2, 0xab, 50000);
    printf("memset ok: %d memchr offset: %ld\n", big2[49999] == 0xab && big2[50000] != 0xab,
           (long)((unsigned char *)memchr(big, 250, sizeof big) - big));
    char longstr[5000];
    memset(longstr, 'q', sizeof longstr - 1);
    longstr[sizeof longstr - 1] = 0;
    longstr[3333] = 'Z';
    printf("strlen(long): %zu strchr(long,'Z') offset: %ld\n", strlen(longstr),
           (long)(strchr(longstr, 'Z') - longstr));
}

/* ------------------------------------------------------------------ snprintf */
static void test_snprintf(void)
{
    section("snprintf");
    char b[64];
    int n = snprintf(b, sizeof b, "%5d|%-5s|%05.1f|%x|%X|%o|%c|%%|%lld|%zu|%+d|%#x",
                     42, "ab", 3.14159, 255, 255, 8, 'Z', -1234567890123LL, (size_t)99, 7, 255);
    printf("snprintf -> %d: %s\n", n, b);
    char small[8];
    const char *volatile long_text = "truncated string"; /* hidden from -Wformat-truncation */
    n = snprintf(small, sizeof small, "%s", long_text);
    printf("truncating snprintf returned %d, got \"%s\"\n", n, small);
    n = snprintf(NULL, 0, "%d-%d", 123, 4567);
    printf("snprintf(NULL,0) length %d\n", n);
    char *heap;
    n = asprintf(&heap, "asprintf %s %d", "value", 99);
    printf("%s (%d)\n", heap, n);
    free(heap);
    int a = 0, c = 0;
    char word[16];
    n = sscanf("17 apples 42", "%d %15s %d", &a, word, &c);
    printf("sscanf: %d fields: %d %s %d\n", n, a, word, c);
}

/* ------------------------------------------------------------------- file io */
static void test_files(void)
{
    section("files");
    const char *name = "data.txt";
    FILE *f = fopen(name, "w");
    CHECK(f != NULL, "fopen w");
    for (int i = 0; i < 100; i++)
        fprintf(f, "line %03d: %d\n", i, i * i);
    fclose(f);

    struct stat st;
    CHECK(stat(name, &st) == 0, "stat");
    printf("stat size: %lld regular: %d\n", (long long)st.st_size, S_ISREG(st.st_mode));

    f = fopen(name, "r");
    CHECK(f != NULL, "fopen r");
    char line[64];
    fgets(line, sizeof line, f);
    printf("first line: %s", line);
    CHECK(fseek(f, 0, SEEK_END) == 0, "fseek end");
    long end = ftell(f);
    printf("ftell at end: %ld\n", end);
    CHECK(fseek(f, -15, SEEK_END) == 0, "fseek -15");
    size_t got = fread(line, 1, sizeof line - 1, f);
    line[got] = 0;
    printf("fread last %zu bytes: %s", got, line);
    rewind(f);
    int lines = 0, ch;
    while ((ch = fgetc(f)) != EOF)
        lines += ch == '\n';
    printf("lines counted: %d feof: %d\n", lines, feof(f) != 0);
    fclose(f);

    /* append mode */
    f = fopen(name, "a");
    fputs("appended\n", f);
    fclose(f);
    CHECK(stat(name, &st) == 0, "stat 2");
    printf("size after append: %lld\n", (long long)st.st_size);

    /* raw fd I/O: pread/pwrite/lseek */
    int fd = open(name, O_RDWR);
    CHECK(fd >= 0, "open");
    char pb[9] = {0};
    ssize_t pr = pread(fd, pb, 8, 0);
    printf("pread(8 @0): %zd \"%s\"\n", pr, pb);
    ssize_t pw = pwrite(fd, "LINE", 4, 0);
    off_t off = lseek(fd, 0, SEEK_CUR);
    printf("pwrite: %zd offset unchanged: %d\n", pw, off == 0);
    char hb[5] = {0};
    ssize_t rr = read(fd, hb, 4);
    printf("read after pwrite: %zd \"%s\"\n", rr, hb);
    close(fd);

    CHECK(rename(name, "renamed.txt") == 0, "rename");
    printf("old name exists after rename: %d\n", access(name, F_OK) == 0);
    printf("new name exists after rename: %d\n", access("renamed.txt", F_OK) == 0);
    CHECK(unlink("renamed.txt") == 0, "unlink");
    printf("exists after unlink: %d\n", access("renamed.txt", F_OK) == 0);
    errno = 0;
    f = fopen("does-not-exist.txt", "r");
    printf("fopen missing: %s errno ENOENT: %d\n", f ? "opened" : "NULL", errno == ENOENT);

    /* creat; setting times (only success is compared: ferrite's timestamps are virtual);
     * copy_file_range with the fallback careful callers have; a file is not a socket. */
    fd = creat("created.txt", 0644);
    CHECK(fd >= 0, "creat");
    printf("creat write: %zd\n", write(fd, "made\n", 5));
    printf("futimens: %d\n", futimens(fd, NULL));
    close(fd);
    struct timespec ts[2] = {{1, 0}, {2, 0}};
    printf("utimensat now: %d set: %d utimes: %d\n", utimensat(AT_FDCWD, "created.txt", NULL, 0),
           utimensat(AT_FDCWD, "created.txt", ts, 0), utimes("created.txt", NULL));
    errno = 0;
    int um = utimensat(AT_FDCWD, "nope.txt", NULL, 0);
    printf("utimensat missing: %d ENOENT: %d\n", um, errno == ENOENT);
    int in = open("created.txt", O_RDONLY);
    int out = open("copy.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ssize_t n = copy_file_range(in, NULL, out, NULL, 64, 0);
    if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EOPNOTSUPP)) {
        char cb[64];
        n = read(in, cb, sizeof cb);
        CHECK(write(out, cb, (size_t)n) == n, "fallback write");
    }
    printf("copied: %zd\n", n);
    struct sockaddr_storage sa;
    socklen_t salen = sizeof sa;
    errno = 0;
    int gp = getpeername(in, (struct sockaddr *)&sa, &salen);
    printf("getpeername on a file: %d ENOTSOCK: %d\n", gp, errno == ENOTSOCK);
    close(in);
    close(out);
    f = fopen("copy.txt", "r");
    CHECK(f != NULL && fgets(line, sizeof line, f) != NULL, "read copy");
    printf("copy holds: %s", line);
    fclose(f);
    int cm = chmod("created.txt", 0600);
    CHECK(stat("created.txt", &st) == 0, "stat created");
    printf("chmod: %d mode %o\n", cm, (unsigned)(st.st_mode & 0777));
    fd = open("created.txt", O_RDONLY);
    int fm = fchmod(fd, 0640);
    close(fd);
    CHECK(stat("created.txt", &st) == 0, "stat created 2");
    printf("fchmod: %d mode %o\n", fm, (unsigned)(st.st_mode & 0777));
    CHECK(unlink("created.txt") == 0 && unlink("copy.txt") == 0, "unlink created");

    /* MAP_SHARED of an ordinary file: stores reach the file, read and write see the mapping. */
    fd = open("mapped.bin", O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0 && ftruncate(fd, 8192) == 0, "mapped create");
    char *mp = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(mp != MAP_FAILED, "mmap shared file");
    if (mp != MAP_FAILED) {
        memcpy(mp, "hello", 5);
        char rb[6] = {0};
        printf("pread sees the mapping: %zd \"%s\"\n", pread(fd, rb, 5, 0), rb);
        CHECK(pwrite(fd, "world", 5, 4096) == 5, "pwrite mapped");
        printf("mapping sees pwrite: %.5s\n", mp + 4096);
        printf("msync: %d\n", msync(mp, 8192, MS_SYNC));
        printf("madvise dontneed: %d keeps: %.5s\n", madvise(mp, 8192, MADV_DONTNEED), mp);
        CHECK(munmap(mp, 8192) == 0, "munmap shared file");
    }
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
    int gl = fcntl(fd, F_GETLK, &fl);
    printf("F_GETLK: %d nobody else holds it: %d\n", gl, fl.l_type == F_UNLCK);
    close(fd);
    fd = open("mapped.bin", O_RDONLY);
    char fb[11] = {0};
    CHECK(pread(fd, fb, 5, 0) == 5 && pread(fd, fb + 5, 5, 4096) == 5, "read mapped back");
    printf("file after munmap: %s\n", fb);
    close(fd);
    CHECK(unlink("mapped.bin") == 0, "unlink mapped");
}

/* ------------------------------------------------------------ dirs & openat */
static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_dirs(void)
{
    section("dirs");
    const char *dir = "subdir";
    CHECK(mkdir(dir, 0755) == 0, "mkdir");
    errno = 0;
    printf("mkdir again fails with EEXIST: %d\n", mkdir(dir, 0755) != 0 && errno == EEXIST);
    const char *files[] = {"zeta", "alpha", "mid.txt", "beta.dat", "Upper", "0num"};
    const int nfiles = (int)(sizeof files / sizeof files[0]);
    char path[256];
    for (int i = 0; i < nfiles; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        FILE *f = fopen(path, "w");
        CHECK(f != NULL, "create file in dir");
        for (int k = 0; k <= i; k++)
            fprintf(f, "%s\n", files[i]);
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/nested", dir);
    CHECK(mkdir(path, 0700) == 0, "mkdir nested");

    DIR *d = opendir(dir);
    CHECK(d != NULL, "opendir");
    char *names[64];
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && n < 64) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        names[n++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], cmp_str);
    printf("readdir: %d entries (sorted):", n);
    for (int i = 0; i < n; i++)
        printf(" %s", names[i]);
    printf("\n");

    /* openat / fstatat relative to a directory fd */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    CHECK(dfd >= 0, "open dir");
    for (int i = 0; i < n; i++) {
        struct stat st;
        CHECK(fstatat(dfd, names[i], &st, 0) == 0, "fstatat");
        printf("  %s: %s size %lld\n", names[i], S_ISDIR(st.st_mode) ? "dir" : "file",
               S_ISDIR(st.st_mode) ? 0LL : (long long)st.st_size);
    }
    int fd = openat(dfd, "beta.dat", O_RDONLY);
    CHECK(fd >= 0, "openat");
    char rb[64] = {0};
    ssize_t r = read(fd, rb, sizeof rb - 1);
    close(fd);
    printf("openat read %zd bytes, first line: %.*s\n", r, (int)strcspn(rb, "\n"), rb);
    fd = openat(dfd, "created_by_openat", O_CREAT | O_WRONLY | O_TRUNC, 0600);
    CHECK(fd >= 0, "openat create");
    printf("write via openat fd: %zd\n", write(fd, "xyz", 3));
    close(fd);
    struct stat st;
    snprintf(path, sizeof path, "%s/created_by_openat", dir);
    int src = stat(path, &st);
    printf("stat via path: %d size %lld\n", src == 0, src == 0 ? (long long)st.st_size : -1LL);
    CHECK(unlinkat(dfd, "created_by_openat", 0) == 0, "unlinkat");
    CHECK(unlinkat(dfd, "nested", AT_REMOVEDIR) == 0, "unlinkat dir");
    close(dfd);

    for (int i = 0; i < nfiles; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        CHECK(unlink(path) == 0, "unlink in dir");
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
    CHECK(rmdir(dir) == 0, "rmdir");
    printf("dir removed: %d\n", access(dir, F_OK) != 0);
}

/* ---------------------------------------------------------------- time etc. */
static void test_time(void)
{
    section("time");
    const time_t y2020 = 1577836800; /* 2020-01-01 */
    const time_t y2100 = 4102444800; /* 2100-01-01 */
    time_t t = time(NULL);
    printf("time ok: %d\n", t > y2020 && t < y2100);

    struct timespec ts;
    int rc = clock_gettime(CLOCK_REALTIME, &ts);
    printf("clock_gettime realtime ok: %d\n",
           rc == 0 && ts.tv_sec >= t - 5 && ts.tv_sec <= t + 5 && ts.tv_nsec >= 0 && ts.tv_nsec < 1000000000);

    struct timespec m1, m2;
    int r1 = clock_gettime(CLOCK_MONOTONIC, &m1);
    volatile unsigned long spin = 0;
    for (int i = 0; i < 100000; i++)
        spin += (unsigned long)i;
    int r2 = clock_gettime(CLOCK_MONOTONIC, &m2);
    int mono_ok = r1 == 0 && r2 == 0 &&
                  (m2.tv_sec > m1.tv_sec || (m2.tv_sec == m1.tv_sec && m2.tv_nsec >= m1.tv_nsec));
    printf("clock_gettime monotonic ok: %d\n", mono_ok);

    struct timeval tv;
    rc = gettimeofday(&tv, NULL);
    printf("gettimeofday ok: %d\n",
           rc == 0 && tv.tv_sec >= t - 5 && tv.tv_sec <= t + 5 && tv.tv_usec >= 0 && tv.tv_usec < 1000000);

    struct tm tm;
    time_t fixed = 1700000000;
    gmtime_r(&fixed, &tm);
    char tb[64];
    strftime(tb, sizeof tb, "%Y-%m-%d %H:%M:%S", &tm);
    printf("gmtime(1700000000): %s wday %d yday %d\n", tb, tm.tm_wday, tm.tm_yday);
    printf("timegm roundtrip: %d\n", timegm(&tm) == fixed);

    unsigned char rb[16];
    ssize_t g = getrandom(rb, sizeof rb, 0);
    printf("getrandom returned %zd of %zu\n", g, sizeof rb);

    char cwd[4096];
    printf("getcwd ok: %d\n", getcwd(cwd, sizeof cwd) != NULL && cwd[0] == '/');

    struct utsname u;
    rc = uname(&u);
    printf("uname: %d sysname %s\n", rc, u.sysname);

    printf("page size ok: %d\n", sysconf(_SC_PAGESIZE) == 4096);
    printf("getpid positive: %d getppid positive: %d\n", getpid() > 0, getppid() >= 0);
    printf("isatty(-1): %d\n", isatty(-1));
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOFBF, 1 << 16); /* same buffering on tty and pipe */
    test_args(argc, argv);
    test_heap();
    test_floats();
    test_qsort();
    test_strings();
    test_snprintf();

    /* Work in a private scratch directory so concurrent runs don't collide. */
    char scratch[64];
    snprintf(scratch, sizeof scratch, "ferrite_workout.%ld", (long)getpid());
    CHECK(mkdir(scratch, 0755) == 0, "mkdir scratch");
    CHECK(chdir(scratch) == 0, "chdir scratch");
    test_files();
    test_dirs();
    CHECK(chdir("..") == 0, "chdir ..");
    CHECK(rmdir(scratch) == 0, "rmdir scratch");

    test_time();

    printf("failures: %d\n", failures);
    printf("libc_workout done, exiting with status 3\n");
    return 3;
}
