/* link_inodes: the names of one file show one inode. Hard links share their inode number and
 * count their links; a renamed file keeps its number; a directory listing shows the numbers
 * stat shows. `git clone` of a local repository checks the hard links it makes this way, `tar`
 * and `du` count a file with several links once. Prints the same natively and under ferrite
 * (never the numbers themselves, only how they compare). Usage: link_inodes (in a scratch
 * directory) */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static struct stat st(const char *path)
{
    struct stat s;
    memset(&s, 0, sizeof s);
    if (lstat(path, &s) < 0)
        printf("lstat(%s): %s\n", path, strerror(errno));
    return s;
}

static const char *same(ino_t a, ino_t b)
{
    return a == b ? "same" : "different";
}

/* The inode number a listing of "." shows for `name`. */
static ino_t listed(const char *name)
{
    DIR *d = opendir(".");
    struct dirent *e;
    ino_t ino = 0;
    while ((e = readdir(d)))
        if (!strcmp(e->d_name, name))
            ino = e->d_ino;
    closedir(d);
    return ino;
}

int main(void)
{
    int fd = open("a", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    write(fd, "data\n", 5);
    struct stat a0 = st("a");
    printf("a alone: %ld link(s)\n", (long)a0.st_nlink);

    printf("link(a, b): %s\n", link("a", "b") < 0 ? strerror(errno) : "ok");
    struct stat a = st("a"), b = st("b");
    printf("a and b: %s inode, %s device, %ld and %ld links\n", same(a.st_ino, b.st_ino),
           a.st_dev == b.st_dev ? "same" : "different", (long)a.st_nlink, (long)b.st_nlink);
    printf("a before and after the link: %s inode\n", same(a0.st_ino, a.st_ino));
    struct stat f;
    fstat(fd, &f);
    printf("fstat of a's descriptor: %s inode, %ld links\n", same(f.st_ino, a.st_ino), (long)f.st_nlink);

    /* A link made through a directory descriptor and a name in a subdirectory. */
    mkdir("sub", 0755);
    int dir = open("sub", O_RDONLY | O_DIRECTORY);
    printf("linkat(sub/c): %s\n", linkat(AT_FDCWD, "b", dir, "c", 0) < 0 ? strerror(errno) : "ok");
    struct stat c = st("sub/c");
    printf("sub/c: %s inode, %ld links\n", same(c.st_ino, a.st_ino), (long)c.st_nlink);

    /* A file seen under one name keeps its number when renamed. */
    printf("rename(b, d): %s\n", rename("b", "d") < 0 ? strerror(errno) : "ok");
    struct stat d = st("d");
    printf("d: %s inode\n", same(d.st_ino, a.st_ino));

    /* Listings show what stat shows. */
    printf("listing of a: %s inode\n", same(listed("a"), a.st_ino));
    printf("listing of d: %s inode\n", same(listed("d"), a.st_ino));
    printf("listing of sub: %s inode\n", same(listed("sub"), st("sub").st_ino));

    /* Removing names counts down; another file has another number. */
    unlink("a");
    unlink("sub/c");
    struct stat d2 = st("d");
    printf("after two unlinks: %ld link(s), %s inode\n", (long)d2.st_nlink, same(d2.st_ino, d.st_ino));
    int other = open("e", O_CREAT | O_WRONLY, 0644);
    struct stat e = st("e");
    printf("another file: %s inode\n", same(e.st_ino, d.st_ino));

    /* A symbolic link is a file of its own; stat through it is its target. */
    symlink("d", "s");
    struct stat sl = st("s"), through;
    stat("s", &through);
    printf("symlink: %s inode, through it: %s inode\n", same(sl.st_ino, d.st_ino), same(through.st_ino, d.st_ino));
    close(other);
    close(dir);
    close(fd);
    return 0;
}
