/* The NUMA memory-policy calls on a machine without NUMA: ENOSYS from each, as from a Linux
 * built without CONFIG_NUMA (what libnuma's numa_available() and procps's ps probe). Under
 * ferrite only: a NUMA host answers otherwise. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static void res(const char *what, long r) {
    printf("%-16s %s\n", what, r < 0 ? strerror(errno) : "0");
}

int main(void) {
    int mode = -1;
    unsigned long mask[2] = {1, 0};
    static char page[4096] __attribute__((aligned(4096)));
    res("get_mempolicy:", syscall(SYS_get_mempolicy, &mode, mask, 128, NULL, 0));
    res("set_mempolicy:", syscall(SYS_set_mempolicy, 0, NULL, 0));
    res("mbind:", syscall(SYS_mbind, page, 4096, 0, NULL, 0, 0));
    res("migrate_pages:", syscall(SYS_migrate_pages, 0, 128, mask, mask));
    res("move_pages:", syscall(SYS_move_pages, 0, 0, NULL, NULL, NULL, 0));
    return 0;
}
