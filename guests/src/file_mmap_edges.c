/* file_mmap_edges: shared mappings whose file does not cover them.  For an
 * ordinary file in the working directory and for POOL (a file on the PM mount,
 * argv[1]), each of:
 *   - a mapping longer than its file: the page past the end raises SIGBUS;
 *   - ftruncate shrinking a mapped file: its pages past the new end raise SIGBUS;
 *   - open with O_TRUNC of a mapped file: every mapped page raises SIGBUS;
 * prints whether each access raised SIGBUS (caught with sigsetjmp) and what the
 * pages still covered read.  Natively and under ferrite alike: the host must
 * never see the fault itself.
 * Usage: file_mmap_edges POOL      exits 0 */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static sigjmp_buf jb;
static void on_bus(int s)
{
    (void)s;
    siglongjmp(jb, 1);
}

/* Stores `c` at p[off]; 1 if it raised SIGBUS. */
static int bus_on_store(volatile char *p, size_t off, char c)
{
    if (sigsetjmp(jb, 1) == 0) {
        p[off] = c;
        return 0;
    }
    return 1;
}

static void edges(const char *what, const char *path)
{
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, 4096) != 0) {
        perror(path);
        return;
    }
    char *p = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        return;
    }
    p[0] = 'a';
    printf("%s: past the end: sigbus %d\n", what, bus_on_store(p, 4096, 'x'));
    if (ftruncate(fd, 3 * 4096) != 0)
        perror("grow");
    munmap(p, 3 * 4096);
    p = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    p[2 * 4096] = 'c';
    printf("%s: grown: sigbus %d\n", what, bus_on_store(p, 4096, 'b'));
    if (ftruncate(fd, 4096) != 0)
        perror("shrink");
    printf("%s: after shrinking: sigbus %d, first page still '%c'\n", what, bus_on_store(p, 2 * 4096, 'y'),
           p[0]);
    int fd2 = open(path, O_RDWR | O_TRUNC);
    printf("%s: after O_TRUNC: sigbus %d\n", what, bus_on_store(p, 0, 'z'));
    close(fd2);
    munmap(p, 3 * 4096);
    close(fd);
    unlink(path);
}

int main(int argc, char **argv)
{
    signal(SIGBUS, on_bus);
    edges("file", "file_mmap_edges.bin");
    edges("pool", argc > 1 ? argv[1] : "/mnt/pmem0/pool");
    return 0;
}
