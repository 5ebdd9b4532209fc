/* caps_pkeys: what node (V8 and libuv) asks at start-up: its capabilities (capget; capset to
 * keep none) and a memory protection key (pkey_alloc). An unprivileged process on a CPU without
 * protection keys, as ferrite presents it, gets empty capability sets and no key: Linux's
 * answers, printed here. (Natively, as root or on a CPU with PKU, the answers differ.)
 * Usage: caps_pkeys */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

struct cap_header {
    uint32_t version;
    int pid;
};
struct cap_data {
    uint32_t effective, permitted, inheritable;
};

static void show(const char *what, long r)
{
    if (r < 0)
        printf("%s: %s\n", what, strerror(errno));
    else
        printf("%s: %ld\n", what, r);
}

int main(void)
{
    struct cap_header h = { 0, 0 };
    struct cap_data d[2];
    memset(d, 0xff, sizeof d);
    /* The version probe libcap makes: an unknown version, no data. */
    show("capget(version 0, NULL)", syscall(SYS_capget, &h, NULL));
    printf("preferred version: %#x\n", h.version);
    show("capget(version 0, data)", syscall(SYS_capget, &(struct cap_header){ 0, 0 }, d));
    show("capget(v3, self)", syscall(SYS_capget, &h, d));
    printf("sets: %x %x %x %x %x %x\n", d[0].effective, d[0].permitted, d[0].inheritable, d[1].effective,
           d[1].permitted, d[1].inheritable);
    show("capget(v3, no such pid)", syscall(SYS_capget, &(struct cap_header){ 0x20080522, 99999 }, d));
    show("capget(v3, pid -1)", syscall(SYS_capget, &(struct cap_header){ 0x20080522, -1 }, d));
    memset(d, 0, sizeof d);
    show("capset(empty sets)", syscall(SYS_capset, &(struct cap_header){ 0x20080522, 0 }, d));
    d[0].effective = d[0].permitted = 1;
    show("capset(CAP_CHOWN)", syscall(SYS_capset, &(struct cap_header){ 0x20080522, 0 }, d));
    show("capset(another pid)", syscall(SYS_capset, &(struct cap_header){ 0x20080522, 1 }, d));

    show("pkey_alloc(0, 0)", syscall(SYS_pkey_alloc, 0, 0));
    show("pkey_alloc(1, 0)", syscall(SYS_pkey_alloc, 1, 0));
    show("pkey_alloc(0, 4)", syscall(SYS_pkey_alloc, 0, 4));
    char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    show("pkey_mprotect(-1)", syscall(SYS_pkey_mprotect, p, 4096, PROT_READ, -1));
    show("pkey_mprotect(0)", syscall(SYS_pkey_mprotect, p, 4096, PROT_READ | PROT_WRITE, 0));
    show("pkey_mprotect(5)", syscall(SYS_pkey_mprotect, p, 4096, PROT_READ, 5));
    p[0] = 1;
    show("pkey_free(3)", syscall(SYS_pkey_free, 3));
    return 0;
}
