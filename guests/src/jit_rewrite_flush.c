/* A JIT's code cache: machine code written by the program into writable and executable memory,
 * run, and rewritten in place by the program's own stores (no system call in between), as JITs
 * do when they patch or recompile code (the JVM's code cache is such a mapping; its intrinsic for
 * MappedByteBuffer.force emits cache-line flushes).
 *
 * The same 12 bytes at the same address hold, in turn:
 *   A: mov byte [rdi], 1 ; clflushopt [rdi] ; sfence ; ret      (a store made durable)
 *   B: mov byte [rdi], 1 ; 7 nops ; ret                       (a store never flushed)
 * and each version is called on its own PM line. The store B makes (on line 1) is never durable:
 * that is the one finding. A decoding remembered from A would see a flush in B and miss it.
 *
 * Usage: jit_rewrite_flush PMFILE
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef void (*store_fn)(char *);

static const unsigned char durable[] = {0xc6, 0x07, 0x01, 0x66, 0x0f, 0xae, 0x3f, 0x0f, 0xae, 0xf8, 0x90, 0xc3};
static const unsigned char lost[] = {0xc6, 0x07, 0x01, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0xc3};

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: jit_rewrite_flush PMFILE\n");
        return 2;
    }
    int fd = open(argv[1], O_CREAT | O_RDWR, 0644);
    if (fd < 0 || ftruncate(fd, 4096) != 0) {
        perror("pm file");
        return 1;
    }
    char *pm = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    unsigned char *code = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pm == MAP_FAILED || code == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    store_fn run = (store_fn)(void *)code;
    memcpy(code, durable, sizeof durable);
    run(pm);
    memcpy(code, lost, sizeof lost);
    run(pm + 64); /* BUG: this call's store is never made durable */
    memcpy(code, durable, sizeof durable);
    run(pm + 128);
    printf("%d %d %d\n", pm[0], pm[64], pm[128]);
    return 0;
}
