/* O_PATH descriptors, of a symbolic link itself (O_PATH | O_NOFOLLOW), a file, a directory and a
 * FIFO: what fstat, fstatat(AT_EMPTY_PATH), readlinkat(fd, ""), read, openat and fcntl make of
 * them. Run in a scratch directory. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind(mode_t m) {
    return S_ISLNK(m) ? "link" : S_ISREG(m) ? "regular" : S_ISDIR(m) ? "directory" : S_ISFIFO(m) ? "fifo" : "other";
}

static void res(const char *what, long r) {
    if (r < 0)
        printf("%-46s -1 %s\n", what, strerror(errno));
    else
        printf("%-46s %ld\n", what, r);
}

int main(void) {
    int t = open("tgt", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    write(t, "data", 4);
    close(t);
    symlink("tgt", "lnk");
    mkdir("dir", 0755);
    mkfifo("fifo", 0644);
    struct stat st;

    int fd = open("lnk", O_PATH | O_NOFOLLOW);
    res("open(lnk, O_PATH | O_NOFOLLOW) >= 0:", fd >= 0 ? 1 : -1);
    fstat(fd, &st);
    printf("  fstat: %s, size %ld\n", kind(st.st_mode), (long)st.st_size);
    char b[64] = {0};
    res("  readlinkat(fd, \"\"):", readlinkat(fd, "", b, sizeof b - 1));
    printf("  the link reads \"%s\"\n", b);
    fstatat(fd, "", &st, AT_EMPTY_PATH);
    printf("  fstatat(fd, \"\", AT_EMPTY_PATH): %s\n", kind(st.st_mode));
    char c[8];
    res("  read:", read(fd, c, sizeof c));
    res("  write:", write(fd, "x", 1));
    printf("  F_GETFL has O_PATH: %s\n", fcntl(fd, F_GETFL) & O_PATH ? "yes" : "no");
    res("open(lnk, O_NOFOLLOW):", open("lnk", O_NOFOLLOW | O_RDONLY));
    res("open(lnk, O_PATH | O_NOFOLLOW | O_DIRECTORY):", open("lnk", O_PATH | O_NOFOLLOW | O_DIRECTORY));

    int f = open("lnk", O_PATH);
    fstat(f, &st);
    printf("open(lnk, O_PATH): %s, size %ld\n", kind(st.st_mode), (long)st.st_size);
    res("  readlinkat(fd, \"\") of a file:", readlinkat(f, "", b, sizeof b));

    int d = open("dir", O_PATH | O_DIRECTORY);
    res("open(dir, O_PATH | O_DIRECTORY) >= 0:", d >= 0 ? 1 : -1);
    int in = openat(d, "inside", O_CREAT | O_WRONLY, 0644);
    res("  openat(dirfd, \"inside\", O_CREAT) >= 0:", in >= 0 ? 1 : -1);
    fstatat(d, "inside", &st, 0);
    printf("  fstatat(dirfd, \"inside\"): %s\n", kind(st.st_mode));
    res("  fchdir:", fchdir(d));
    res("  back:", chdir(".."));

    int p = open("fifo", O_PATH);
    res("open(fifo, O_PATH) (no waiting) >= 0:", p >= 0 ? 1 : -1);
    fstat(p, &st);
    printf("  fstat: %s\n", kind(st.st_mode));
    res("open(missing, O_PATH):", open("missing", O_PATH));

    unlink("dir/inside");
    rmdir("dir");
    unlink("fifo");
    unlink("lnk");
    unlink("tgt");
    return 0;
}
