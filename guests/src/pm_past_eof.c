/* pm_past_eof: maps 8 KiB of a 4 KiB PM file and touches the second page: SIGBUS (135) at the
 * line marked PAST EOF, as on Linux. */
#include "pm.h"

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    int fd = open(path, O_CREAT | O_RDWR, 0644);
    if (fd < 0 || ftruncate(fd, 4096) != 0)
        return 2;
    char *p = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return 2;
    p[0] = 'a';
    printf("first page ok\n");
    fflush(stdout);
    p[4096] = 'b'; /* PAST EOF */
    printf("not reached\n");
    return 0;
}
