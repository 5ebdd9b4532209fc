/* pm_syscall_loads: the kernel reading PM for a system call is a load by the calling thread, so
 * a persistence-induced race through it is found like one through a plain load.  A writer thread
 * stores a PM value and persists it; main, without waiting, hands the value to the kernel in one
 * of several ways (MODE):
 *   writev, pwritev, sendmsg, sendto   - from the PM buffer of the mapping;
 *   pread, sendfile, splice            - from the mapped PM file itself (a DAX read copies PM).
 *   - BUG (this file): main's call is not ordered after the writer's persist (STORE, LOAD lines).
 *   - FIXED (pm_syscall_loads_fixed): main joins the writer first.
 * Usage: pm_syscall_loads POOL MODE; prints whether the value the kernel copied is one the
 * writer's store allows; exits 0. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "pm.h"

struct root {
    volatile uint64_t x;
    uint64_t pad[7];
};

static struct root *r;

static void *writer(void *arg)
{
    (void)arg;
    r->x = 42; /* STORE: by the writer */
    PM_CLWB(&r->x); PM_SFENCE();
    return NULL;
}

/* Hands r->x (or the file's first 8 bytes) to the kernel as MODE says; returns what arrived at
 * the other end (or -1 on failure). */
static long long hand_over(const char *mode, const char *path)
{
    int p[2], s[2];
    uint64_t got = 0;
    long n = -1;
    if (pipe(p) || socketpair(AF_UNIX, SOCK_STREAM, 0, s))
        return -1;
    int fd = open(path, O_RDONLY);
    struct iovec iov = {(void *)&r->x, 8};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    loff_t off = 0;
    if (!strcmp(mode, "writev"))
        n = writev(p[1], &iov, 1); /* LOAD: writev */
    else if (!strcmp(mode, "pwritev")) {
        char tmp[] = "/tmp/pm_syscall_loads.XXXXXX";
        int t = mkstemp(tmp);
        unlink(tmp);
        n = pwritev(t, &iov, 1, 0); /* LOAD: pwritev */
        if (pread(t, &got, 8, 0) != 8)
            return -1;
        close(t);
        return (long long)got;
    } else if (!strcmp(mode, "sendmsg"))
        n = sendmsg(s[0], &msg, 0); /* LOAD: sendmsg */
    else if (!strcmp(mode, "sendto"))
        n = sendto(s[0], (void *)&r->x, 8, 0, NULL, 0); /* LOAD: sendto */
    else if (!strcmp(mode, "pread")) {
        n = pread(fd, &got, 8, 0); /* LOAD: pread */
        return n == 8 ? (long long)got : -1;
    } else if (!strcmp(mode, "sendfile"))
        n = sendfile(p[1], fd, &off, 8); /* LOAD: sendfile */
    else if (!strcmp(mode, "splice"))
        n = splice(fd, &off, p[1], NULL, 8, 0); /* LOAD: splice */
    if (n != 8)
        return -1;
    int from = (!strcmp(mode, "sendmsg") || !strcmp(mode, "sendto")) ? s[1] : p[0];
    if (read(from, &got, 8) != 8)
        return -1;
    return (long long)got;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: pm_syscall_loads POOL MODE\n");
        return 2;
    }
    const char *path = argv[1];
    const char *mode = argv[2];
    r = pm_map(path, 4096);
    pthread_t w;
    pthread_create(&w, NULL, writer, NULL);
#ifdef FIXED
    pthread_join(w, NULL); /* FIX: the kernel's read waits for the writer */
    long long v = hand_over(mode, path);
#else
    long long v = hand_over(mode, path);
    pthread_join(w, NULL);
#endif
    printf("%s: %s\n", mode, v == 0 || v == 42 ? "0 or 42" : "wrong");
    return 0;
}
