/* pm_kernel_io: the kernel's accesses to PM count.
 *
 * mode "msync":  stores into the pool, then msync(MS_SYNC) of the mapping: durable, no finding.
 * mode "read":   read() from a regular file into the pool, never persisted: the read() call's
 *                line is an unpersisted store (marked KERNEL STORE).
 * mode "pwrite": stores into the pool, then pwrite() of the same bytes to the pool file: a
 *                write to a DAX file is durable, so the overwritten lines are clean: no finding
 *                for them, but the store on the line marked NOT COVERED (outside the pwrite) is.
 * Usage: pm_kernel_io MODE [POOL]; exits 0.
 */
#include "pm.h"

#define POOL_SIZE 4096

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "msync";
    const char *path = argc > 2 ? argv[2] : PM_DEFAULT_POOL;
    int fd = open(path, O_CREAT | O_RDWR, 0644);
    if (fd < 0 || ftruncate(fd, POOL_SIZE) != 0) {
        perror("pool");
        return 2;
    }
    char *pool = mmap(NULL, POOL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (pool == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    if (strcmp(mode, "msync") == 0) {
        memcpy(pool, "synced by msync", 16);
        if (msync(pool, POOL_SIZE, MS_SYNC) != 0) {
            perror("msync");
            return 2;
        }
        printf("msync: %s\n", pool);
    } else if (strcmp(mode, "read") == 0) {
        int in = open("input.txt", O_CREAT | O_RDWR | O_TRUNC, 0644);
        if (in < 0 || write(in, "from a file", 12) != 12 || lseek(in, 0, SEEK_SET) != 0) {
            perror("input");
            return 2;
        }
        ssize_t n = read(in, pool + 128, 12); /* KERNEL STORE */
        printf("read %zd bytes into PM: %s\n", n, pool + 128);
        close(in);
        unlink("input.txt");
    } else if (strcmp(mode, "pwrite") == 0) {
        memcpy(pool, "covered by pwrite", 18);
        pool[256] = 'x'; /* NOT COVERED */
        if (pwrite(fd, pool, 64, 0) != 64) {
            perror("pwrite");
            return 2;
        }
        printf("pwrite: %s\n", pool);
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    return 0;
}
