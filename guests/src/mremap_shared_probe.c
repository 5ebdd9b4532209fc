/* mremap_shared_probe: grows shared memory of a fixed size with mremap and touches the pages it
 * grew by. Linux's shared anonymous mappings and System V segments are shmem objects whose size
 * mremap does not change, so the grown pages raise SIGBUS (the object's fault handler refuses
 * offsets past its size); the pages it kept stay the object's, shared with a forked child.
 * Cases: moved (MREMAP_MAYMOVE to a new place), in place (room reserved after it), a System V
 * attachment, and a second growth of a grown mapping. Prints the signal each touch raised
 * (0: none) and exits 0. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAGE 4096

static sigjmp_buf jb;

static void on_fault(int sig)
{
    siglongjmp(jb, sig);
}

/* The signal a store to `p` raises, or 0. */
static int touch(volatile char *p)
{
    int sig = sigsetjmp(jb, 1);
    if (sig)
        return sig;
    *p = 1;
    return 0;
}

/* Whether a child process sees the parent's store to the kept page (it is still shared). */
static int shared_with_child(volatile char *p)
{
    p[0] = 0;
    pid_t c = fork();
    if (c == 0) {
        p[0] = 42;
        _exit(0);
    }
    waitpid(c, 0, 0);
    return p[0] == 42;
}

int main(void)
{
    struct sigaction sa = {0};
    sa.sa_handler = on_fault;
    sigaction(SIGBUS, &sa, 0);
    sigaction(SIGSEGV, &sa, 0);

    char *a = mmap(0, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    char *b = mremap(a, PAGE, 2 * PAGE, MREMAP_MAYMOVE);
    printf("moved: kept %d grown %d shared %d\n", touch(b), touch(b + PAGE), shared_with_child(b));
    char *b2 = mremap(b, 2 * PAGE, 3 * PAGE, MREMAP_MAYMOVE);
    printf("grown again: kept %d grown %d %d\n", touch(b2), touch(b2 + PAGE), touch(b2 + 2 * PAGE));

    int id = shmget(IPC_PRIVATE, PAGE, IPC_CREAT | 0600);
    char *c = shmat(id, 0, 0);
    char *d = mremap(c, PAGE, 2 * PAGE, MREMAP_MAYMOVE);
    if (d == MAP_FAILED)
        printf("sysv: refused\n");
    else
        printf("sysv: kept %d grown %d shared %d\n", touch(d), touch(d + PAGE), shared_with_child(d));
    shmctl(id, IPC_RMID, 0);

    char *room = mmap(0, 3 * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(room + PAGE, 2 * PAGE);
    char *f = mmap(room, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    char *g = mremap(f, PAGE, 2 * PAGE, 0);
    if (g == MAP_FAILED)
        printf("in place: refused\n");
    else
        printf("in place: %s kept %d grown %d\n", g == f ? "same" : "moved", touch(g), touch(g + PAGE));
    return 0;
}
