/* dir_fchmod: sets a directory's mode through a descriptor of it (fchmod), as rsync does for
 * each directory it copies once it has filled it, and prints the mode stat then shows.
 * Usage: dir_fchmod      (in a scratch directory) exits 0 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

int main(void)
{
    umask(022);
    if (mkdir("d", 0700) != 0) {
        perror("mkdir");
        return 1;
    }
    int fd = open("d", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fchmod(fd, 0750) != 0) {
        perror("fchmod");
        return 1;
    }
    struct stat st;
    stat("d", &st);
    printf("d: %o\n", (unsigned)(st.st_mode & 07777));
    fstat(fd, &st);
    printf("fstat: %o\n", (unsigned)(st.st_mode & 07777));
    close(fd);
    return 0;
}
