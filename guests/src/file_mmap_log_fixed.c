/* file_mmap_log_fixed: a record and its commit mark written through a MAP_SHARED
 * mapping of an ordinary file in the working directory, each made durable by
 * msync(MS_SYNC).
 *
 * FIXED: the record (byte 1, 'B') is stored and msynced before the commit mark
 * (byte 0, 'A'), so every crash leaves either no mark or the mark and its
 * record (file_mmap_log.c is the buggy twin).
 *
 * Usage: file_mmap_log_fixed [recover]
 *   normal mode:  creates log.bin (4096 bytes), writes and msyncs the mark and
 *                 the record, unmaps, prints "log written", exits 0.
 *   recover mode: reads log.bin; no file or no mark is a log never committed
 *                 (exit 0); a mark without its record fails (exit 1,
 *                 "recovery: committed record lost"); prints "recovery ok".
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "recover") == 0) {
        char b[2] = {0};
        int fd = open("log.bin", O_RDONLY);
        if (fd < 0 || pread(fd, b, 2, 0) < 2 || b[0] != 'A') {
            printf("recovery ok: nothing committed\n");
            return 0;
        }
        if (b[1] != 'B') {
            printf("recovery: committed record lost\n");
            return 1;
        }
        printf("recovery ok\n");
        return 0;
    }
    int fd = open("log.bin", O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, 4096) != 0) {
        perror("log.bin");
        return 1;
    }
    char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    p[1] = 'B';
    msync(p, 4096, MS_SYNC); /* FIX: the record is durable before the mark */
    p[0] = 'A';
    msync(p, 4096, MS_SYNC);
    munmap(p, 4096);
    close(fd);
    printf("log written\n");
    return 0;
}
