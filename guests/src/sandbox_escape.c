/* sandbox_escape: tries to create or change files outside the working directory in every way
 * the sandbox must refuse. argv[1] is the absolute path of a directory outside, argv[2] the same
 * directory relative to the working directory (e.g. ../outside). Prints one line per attempt,
 * "NAME: refused (ERRNO)" or "NAME: ALLOWED", and checks inside-the-sandbox operations work.
 * Then tries to see the host through symbolic links the guest makes (to /proc/1/cmdline,
 * /proc/self/{environ,mem,status}), /etc/mtab and /dev/fd, /dev/stdin: "NAME: guest" when what
 * it sees is the guest's own, "NAME: HOST ..." otherwise.
 * Under ferrite every escape is refused; natively (no sandbox) they succeed: not for native runs. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char buf[4096];

static const char *path(const char *dir, const char *name)
{
    snprintf(buf, sizeof buf, "%s/%s", dir, name);
    return buf;
}

static void report(const char *name, int rc)
{
    if (rc < 0)
        printf("%s: refused (%s)\n", name, strerrorname_np(errno));
    else
        printf("%s: ALLOWED\n", name);
}

/* Reads what `p` holds (at most sizeof buf - 1 bytes); -1 if it cannot be opened. */
static int slurp(const char *p, int flags)
{
    int fd = open(p, flags);
    if (fd < 0)
        return -1;
    int n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    return n;
}

/* Links the guest makes to the host's /proc, /etc/mtab and /dev/fd. */
static void host_views(void)
{
    static const char *proc[] = {"/proc/1/cmdline", "/proc/self/environ", "/proc/self/mem"};
    char name[64];
    for (unsigned i = 0; i < sizeof proc / sizeof *proc; i++) {
        snprintf(name, sizeof name, "plink%u", i);
        symlink(proc[i], name);
        char what[128];
        snprintf(what, sizeof what, "link to %s", proc[i]);
        report(what, slurp(name, O_RDONLY));
    }
    /* The guest's own status says pid 1000 (ferrite's virtual pid), the host's another. */
    symlink("/proc/self/status", "slink");
    int n = slurp("slink", O_RDONLY);
    printf("link to /proc/self/status: %s\n", n > 0 && strstr(buf, "\nPid:\t1000\n") ? "guest" : "HOST");
    /* /etc/mtab and /proc/mounts: the guest's mounts have its PM mount and no overlay. */
    n = slurp("/etc/mtab", O_RDONLY);
    printf("/etc/mtab: %s\n", n > 0 && strstr(buf, " /mnt/pmem0 ") && !strstr(buf, "overlay") ? "guest" : "HOST");
    symlink("/etc/mtab", "mlink");
    n = slurp("mlink", O_RDONLY);
    printf("link to /etc/mtab: %s\n", n > 0 && strstr(buf, " /mnt/pmem0 ") ? "guest" : "HOST");
    /* /dev/fd/N of a pipe of the guest's reads that pipe (ferrite's own N is another file). */
    int p[2];
    if (pipe(p) == 0 && write(p[1], "piped", 5) == 5) {
        char devfd[64];
        snprintf(devfd, sizeof devfd, "/dev/fd/%d", p[0]);
        n = slurp(devfd, O_RDONLY);
        printf("/dev/fd/N of a pipe: %s\n", n == 5 && memcmp(buf, "piped", 5) == 0 ? "guest" : "HOST");
        close(p[0]);
        close(p[1]);
    }
    /* A descriptor opened on a file: /dev/fd/N is that file. */
    int fd = open("viewed", O_CREAT | O_RDWR, 0644);
    if (write(fd, "x", 1) != 1)
        perror("write");
    char devfd[64];
    snprintf(devfd, sizeof devfd, "/dev/fd/%d", fd);
    n = slurp(devfd, O_RDONLY);
    printf("/dev/fd/N of a file: %s\n", n == 1 && buf[0] == 'x' ? "guest" : "HOST");
    close(fd);
    /* Standard input is /dev/null for the test: reading /dev/stdin gives end of file at once. */
    n = slurp("/dev/stdin", O_RDONLY);
    printf("/dev/stdin: %s\n", n == 0 ? "guest" : "HOST");
}

static int creat_at(int dirfd, const char *p, int extra)
{
    int fd = openat(dirfd, p, O_CREAT | O_WRONLY | extra, 0644);
    if (fd >= 0) {
        if (write(fd, "x", 1) != 1)
            perror("write");
        close(fd);
    }
    return fd;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: sandbox_escape OUTSIDE_ABS OUTSIDE_REL\n");
        return 2;
    }
    const char *abs = argv[1], *rel = argv[2];
    char proc_root[4096], proc_cwd[4096], proc_fd[4096];

    report("absolute path", creat_at(AT_FDCWD, path(abs, "a"), 0));
    report("dot-dot traversal", creat_at(AT_FDCWD, path(rel, "b"), 0));
    int up = open("..", O_RDONLY | O_DIRECTORY);
    const char *leaf = strrchr(abs, '/') + 1;
    char via_dirfd[4096];
    snprintf(via_dirfd, sizeof via_dirfd, "%s/c", leaf);
    report("dirfd-relative", creat_at(up, via_dirfd, 0));
    report("symlink to outside", symlink(path(abs, "e"), "lnk") < 0 ? -1 : 0 /* created inside: allowed */);
    report("O_NOFOLLOW through the link", creat_at(AT_FDCWD, "lnk", O_NOFOLLOW));
    report("O_CREAT through a dangling link", creat_at(AT_FDCWD, "lnk", 0));
    int in = creat_at(AT_FDCWD, "inside", 0);
    report("rename out", rename("inside", path(abs, "f")));
    report("hard link out", link("inside", path(abs, "g")));
    report("symlink created outside", symlink("inside", path(abs, "h")));
    int fd = open("inside", O_RDONLY);
    report("AT_EMPTY_PATH link out", linkat(fd, "", AT_FDCWD, path(abs, "i"), AT_EMPTY_PATH));
    report("O_TMPFILE outside", open(abs, O_TMPFILE | O_WRONLY, 0600));
    snprintf(proc_root, sizeof proc_root, "/proc/self/root%s/j", abs);
    report("/proc/self/root", creat_at(AT_FDCWD, proc_root, 0));
    snprintf(proc_cwd, sizeof proc_cwd, "/proc/self/cwd/%s/k", rel);
    report("/proc/self/cwd", creat_at(AT_FDCWD, proc_cwd, 0));
    snprintf(proc_fd, sizeof proc_fd, "/proc/self/fd/%d/%s/l", up, leaf);
    report("/proc/self/fd/N", creat_at(AT_FDCWD, proc_fd, 0));
    report("mkdir outside", mkdir(path(abs, "m"), 0755));
    report("unlink outside", unlink(path(abs, "keep")));
    report("truncate outside", truncate(path(abs, "keep"), 0));
    report("write /etc/hostname", creat_at(AT_FDCWD, "/etc/hostname", 0));
    /* Inside the working directory everything works. */
    printf("inside file: %s\n", in >= 0 && access("inside", W_OK) == 0 ? "ok" : "broken");
    printf("inside mkdir+rename: %s\n",
           mkdir("d", 0755) == 0 && rename("inside", "d/moved") == 0 && unlink("d/moved") == 0 && rmdir("d") == 0
               ? "ok"
               : "broken");
    close(fd);
    close(up);
    host_views();
    return 0;
}
