/* sandbox_escape: tries to create or change files outside the working directory in every way
 * the sandbox must refuse. argv[1] is the absolute path of a directory outside, argv[2] the same
 * directory relative to the working directory (e.g. ../outside). Prints one line per attempt,
 * "NAME: refused (ERRNO)" or "NAME: ALLOWED", and checks inside-the-sandbox operations work.
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
    return 0;
}
