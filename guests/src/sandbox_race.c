/* sandbox_race: hammers the sandbox's check-then-open window. `sandbox_race N OUTSIDE swap`
 * repeats N times: swap the directory `d` of the working directory for a symbolic link to
 * OUTSIDE (an absolute path outside every writable root), try twice to create `d/new`, swap it
 * back, try twice again (4N tries); `sandbox_race N OUTSIDE open` only tries, N times (something
 * else swaps `d`). Runs
 * that share a working directory (`--explore`, or a host process swapping) race each other's
 * swaps against their opens. Prints how many creations succeeded (in the directory `d`) and how
 * many were refused; the caller checks OUTSIDE is untouched. Not for native runs: natively the
 * creations through the link escape. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static long written, refused;

static void attempt(void)
{
    int fd = open("d/new", O_WRONLY | O_CREAT, 0644);
    if (fd < 0) {
        refused++;
        return;
    }
    written++;
    close(fd);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: sandbox_race N OUTSIDE swap|open\n");
        return 2;
    }
    long n = atol(argv[1]);
    const char *outside = argv[2];
    int swap = strcmp(argv[3], "swap") == 0;
    if (swap)
        mkdir("d", 0755);
    for (long i = 0; i < n; i++) {
        if (swap) {
            /* d -> link to outside; another run may be between its check and its open. */
            if (rename("d", "d.dir") == 0 && symlink(outside, "d") != 0)
                rename("d.dir", "d");
            attempt();
            attempt();
            /* and back to the directory */
            if (unlink("d") == 0)
                rename("d.dir", "d");
            attempt();
        }
        attempt();
    }
    printf("written %ld refused %ld\n", written, refused);
    return 0;
}
