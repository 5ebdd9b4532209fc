// openat2(2) and struct open_how as Linux checks them, in the working directory (a fresh scratch
// directory): the size (EINVAL below 24, E2BIG above a page or with unknown bytes set), flags,
// mode and resolve flags refused, RESOLVE_CACHED with O_CREAT; then the walk: RESOLVE_NO_SYMLINKS,
// RESOLVE_BENEATH (absolute paths, `..` above the directory, absolute and escaping links),
// RESOLVE_IN_ROOT (the same, kept inside), RESOLVE_NO_MAGICLINKS (/proc/self/fd/N,
// /proc/self/exe) and RESOLVE_NO_XDEV (into /proc). Every line is the same natively and under
// ferrite.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

struct how {
    uint64_t flags, mode, resolve;
    uint64_t extra[2];
};

#define NO_XDEV 0x01
#define NO_MAGICLINKS 0x02
#define NO_SYMLINKS 0x04
#define BENEATH 0x08
#define IN_ROOT 0x10
#define CACHED 0x20

static long o2(int dirfd, const char *path, uint64_t flags, uint64_t mode, uint64_t resolve, size_t size) {
    struct how h = {flags, mode, resolve, {0, 0}};
    return syscall(SYS_openat2, dirfd, path, &h, size);
}

static void show(const char *what, long fd) {
    if (fd < 0) {
        printf("%-58s -1 %s\n", what, strerror(errno));
        return;
    }
    char buf[32] = {0};
    ssize_t n = read(fd, buf, sizeof buf - 1);
    if (n > 0 && buf[n - 1] == '\n')
        buf[n - 1] = 0;
    printf("%-58s ok%s%s\n", what, n > 0 ? " " : "", n > 0 ? buf : "");
    close(fd);
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    mkdir("d", 0755);
    mkdir("d/sub", 0755);
    int f = open("d/f", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    write(f, "in d", 4);
    close(f);
    f = open("d/sub/g", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    write(f, "in sub", 6);
    close(f);
    f = open("top", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    write(f, "above d", 7);
    close(f);
    char abs[PATH_MAX];
    if (!realpath("d/f", abs))
        return 1;
    symlink("sub/g", "d/rel");
    symlink(abs, "d/abs");
    symlink("../top", "d/up");
    symlink("/f", "d/rootlink");

    struct how h = {O_RDONLY, 0, 0, {0, 0}};
    show("size 0", syscall(SYS_openat2, AT_FDCWD, "d/f", &h, 0));
    show("size 23", o2(AT_FDCWD, "d/f", O_RDONLY, 0, 0, 23));
    show("size 24", o2(AT_FDCWD, "d/f", O_RDONLY, 0, 0, 24));
    show("size 32, the extra bytes zero", o2(AT_FDCWD, "d/f", O_RDONLY, 0, 0, 32));
    h.extra[0] = 1;
    show("size 32, an extra byte set", syscall(SYS_openat2, AT_FDCWD, "d/f", &h, 32));
    show("size 4097", syscall(SYS_openat2, AT_FDCWD, "d/f", &h, 4097));
    show("a flag in the upper 32 bits", o2(AT_FDCWD, "d/f", 1ull << 40, 0, 0, 24));
    show("an unknown resolve flag", o2(AT_FDCWD, "d/f", O_RDONLY, 0, 0x40, 24));
    show("RESOLVE_BENEATH | RESOLVE_IN_ROOT", o2(AT_FDCWD, "d/f", O_RDONLY, 0, BENEATH | IN_ROOT, 24));
    show("a mode without O_CREAT", o2(AT_FDCWD, "d/f", O_RDONLY, 0644, 0, 24));
    show("O_CREAT with mode 010644", o2(AT_FDCWD, "d/new", O_RDWR | O_CREAT, 010644, 0, 24));
    show("RESOLVE_CACHED with O_CREAT", o2(AT_FDCWD, "d/new", O_RDWR | O_CREAT, 0644, CACHED, 24));
    show("O_CREAT with mode 0644", o2(AT_FDCWD, "d/new", O_RDWR | O_CREAT, 0644, 0, 24));
    show("a missing file", o2(AT_FDCWD, "d/missing", O_RDONLY, 0, 0, 24));
    show("O_DIRECTORY of a file", o2(AT_FDCWD, "d/f", O_RDONLY | O_DIRECTORY, 0, 0, 24));
    show("a bad path pointer", o2(AT_FDCWD, (const char *)8, O_RDONLY, 0, 0, 24));

    int d = open("d", O_RDONLY | O_DIRECTORY);
    show("d: rel (-> sub/g)", o2(d, "rel", O_RDONLY, 0, 0, 24));
    show("d: rel, RESOLVE_NO_SYMLINKS", o2(d, "rel", O_RDONLY, 0, NO_SYMLINKS, 24));
    show("d: rel, RESOLVE_NO_SYMLINKS | O_NOFOLLOW", o2(d, "rel", O_RDONLY | O_NOFOLLOW, 0, NO_SYMLINKS, 24));
    show("d: f, RESOLVE_NO_SYMLINKS", o2(d, "f", O_RDONLY, 0, NO_SYMLINKS, 24));
    show("d: sub/../f, RESOLVE_BENEATH", o2(d, "sub/../f", O_RDONLY, 0, BENEATH, 24));
    show("d: ../top, RESOLVE_BENEATH", o2(d, "../top", O_RDONLY, 0, BENEATH, 24));
    show("d: ../top", o2(d, "../top", O_RDONLY, 0, 0, 24));
    show("d: /etc/hostname, RESOLVE_BENEATH", o2(d, "/etc/hostname", O_RDONLY, 0, BENEATH, 24));
    show("d: abs (absolute link), RESOLVE_BENEATH", o2(d, "abs", O_RDONLY, 0, BENEATH, 24));
    show("d: abs", o2(d, "abs", O_RDONLY, 0, 0, 24));
    show("d: rel, RESOLVE_BENEATH", o2(d, "rel", O_RDONLY, 0, BENEATH, 24));
    show("d: up (-> ../top), RESOLVE_BENEATH", o2(d, "up", O_RDONLY, 0, BENEATH, 24));
    show("d: /f, RESOLVE_IN_ROOT", o2(d, "/f", O_RDONLY, 0, IN_ROOT, 24));
    show("d: ../../sub/g, RESOLVE_IN_ROOT", o2(d, "../../sub/g", O_RDONLY, 0, IN_ROOT, 24));
    show("d: rootlink (-> /f), RESOLVE_IN_ROOT", o2(d, "rootlink", O_RDONLY, 0, IN_ROOT, 24));
    show("d: up (-> ../top), RESOLVE_IN_ROOT", o2(d, "up", O_RDONLY, 0, IN_ROOT, 24));
    show("d: abs, RESOLVE_IN_ROOT", o2(d, "abs", O_RDONLY, 0, IN_ROOT, 24));

    int held = open("d/f", O_RDONLY);
    char magic[64];
    snprintf(magic, sizeof magic, "/proc/self/fd/%d", held);
    show("/proc/self/fd/N", o2(AT_FDCWD, magic, O_RDONLY, 0, 0, 24));
    show("/proc/self/fd/N, RESOLVE_NO_MAGICLINKS", o2(AT_FDCWD, magic, O_RDONLY, 0, NO_MAGICLINKS, 24));
    show("/proc/self/exe, RESOLVE_NO_MAGICLINKS", o2(AT_FDCWD, "/proc/self/exe", O_RDONLY, 0, NO_MAGICLINKS, 24));
    int proc = open("/proc", O_RDONLY | O_DIRECTORY);
    show("/proc: self/fd/N, RESOLVE_BENEATH", o2(proc, magic + 6, O_RDONLY, 0, BENEATH, 24));
    show("d/f, RESOLVE_NO_XDEV", o2(AT_FDCWD, "d/f", O_RDONLY, 0, NO_XDEV, 24));
    show("/proc/self/status, RESOLVE_NO_XDEV", o2(AT_FDCWD, "/proc/self/status", O_RDONLY, 0, NO_XDEV, 24) >= 0 ? 3 : -1);
    show("/proc: self/comm, RESOLVE_NO_XDEV", o2(proc, "self/comm", O_RDONLY, 0, NO_XDEV, 24));
    printf("openat2_probe done\n");
    return 0;
}
