// Thousands of live mappings, as an allocator with many large blocks makes them: `many_mappings N`
// mallocs N blocks of 200 KiB (each its own mmap: glibc's threshold is 128 KiB), writes a page
// of each, frees every third, maps it again, turns every fifth block read-only and reads them
// all back; prints a checksum. `many_mappings N fault` then makes one block of the middle
// PROT_NONE and reads it: a SIGSEGV at the line marked FAULT. Used by tests/many_mappings.rs.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define BLOCK (200 * 1024)

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 2000;
    int fault = argc > 2 && strcmp(argv[2], "fault") == 0;
    unsigned char **p = malloc(n * sizeof *p);
    if (!p)
        return 1;
    for (int i = 0; i < n; i++) {
        p[i] = malloc(BLOCK);
        if (!p[i]) {
            printf("malloc %d failed\n", i);
            return 1;
        }
        memset(p[i], i & 0xff, 4096);
        p[i][BLOCK - 1] = (unsigned char)(i * 7);
    }
    for (int i = 0; i < n; i += 3) {
        free(p[i]);
        p[i] = malloc(BLOCK);
        if (!p[i])
            return 1;
        p[i][0] = (unsigned char)(i + 1);
        p[i][BLOCK - 1] = (unsigned char)(i * 7);
    }
    // glibc's mmapped chunks start 16 bytes into their mapping: the mapping's pages.
    for (int i = 0; i < n; i += 5) {
        unsigned char *page = (unsigned char *)((unsigned long)p[i] & ~4095UL);
        if (mprotect(page + 4096, 8192, PROT_READ) != 0) {
            perror("mprotect");
            return 1;
        }
    }
    unsigned long sum = 0;
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < n; i++)
            sum = sum * 31 + p[i][0] + p[i][5] + p[i][BLOCK - 1] + p[i][4096 + 8];
    printf("%d blocks, checksum %lu\n", n, sum);
    if (fault) {
        unsigned char *victim = (unsigned char *)((unsigned long)p[n / 2] & ~4095UL);
        if (mprotect(victim, BLOCK, PROT_NONE) != 0) {
            perror("mprotect");
            return 1;
        }
        fflush(stdout);
        volatile unsigned char *v = victim + 100;
        sum += *v; // FAULT
        printf("not reached %lu\n", sum);
    }
    return 0;
}
