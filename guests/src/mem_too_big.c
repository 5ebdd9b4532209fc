/* mem_too_big: maps SIZE bytes of anonymous memory and writes into it without checking mmap's
 * result, as programs that "cannot run out of memory" do: when the mapping fails the write goes
 * through MAP_FAILED and the program dies of SIGSEGV, far from the cause.
 *
 * Usage: mem_too_big SIZE_MIB   prints `mapped SIZE_MIB MiB` and exits 0 if the write worked. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 1;
    char *p = mmap(NULL, mib << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    p[4096] = 1; /* deliberately unchecked */
    printf("mapped %zu MiB\n", mib);
    return 0;
}
