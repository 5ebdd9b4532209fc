/* pm_torn_fault: an 8-byte store that starts in the last 4 bytes of a PM mapping and runs into
 * the unmapped page after it faults (SIGSEGV, 139) at the line marked TORN STORE. x86 faults
 * are precise: nothing of the store happens, so no PM store is left to report. */
#include "pm.h"

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    int fd = open(path, O_CREAT | O_RDWR, 0644);
    if (fd < 0 || ftruncate(fd, 4096) != 0)
        return 2;
    char *p = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED || munmap(p + 4096, 4096) != 0)
        return 2;
    puts("storing across the end of the mapping");
    fflush(stdout);
    volatile uint64_t *q = (volatile uint64_t *)(p + 4092);
    *q = 0x1122334455667788ull; /* TORN STORE */
    return 0;
}
