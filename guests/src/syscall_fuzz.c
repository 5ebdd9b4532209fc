/* syscall_fuzz: makes COUNT raw system calls with numbers and arguments from a seeded PRNG, to
 * fuzz ferrite's system-call layer (only under ferrite: natively it would do anything at all).
 * Arguments mix small integers, pointers into a scratch buffer, pointers into unmapped memory,
 * and random 64-bit values. Calls that would end the process or replace its image are skipped,
 * so the run ends on its own: exit 0, or a fault finding when a random call pulls memory from
 * under the program, which is fine: the goal is that ferrite never panics.
 * Usage: syscall_fuzz SEED COUNT */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static uint64_t state;
static uint64_t next(void)
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

static char scratch[65536];

static long arg(void)
{
    switch (next() % 6) {
    case 0: return (long)(next() % 16);
    case 1: return (long)(next() % 4096);
    case 2: return (long)(scratch + next() % (sizeof scratch - 64));
    case 3: return (long)0x10;
    case 4: return -(long)(next() % 8);
    default: return (long)next();
    }
}

int main(int argc, char **argv)
{
    state = argc > 1 ? strtoull(argv[1], NULL, 0) * 2654435761u + 1 : 1;
    long count = argc > 2 ? atol(argv[2]) : 1000;
    long made = 0;
    for (long i = 0; i < count; i++) {
        long nr = (long)(next() % 450);
        switch (nr) {
        case SYS_exit: case SYS_exit_group: case SYS_execve: case SYS_execveat: case SYS_kill:
        case SYS_tkill: case SYS_tgkill: case SYS_rt_sigreturn: case SYS_clone: case SYS_clone3:
        case SYS_fork: case SYS_vfork: case SYS_munmap: case SYS_mremap: case SYS_mprotect:
        case SYS_brk: case SYS_rt_sigaction: case SYS_rt_sigprocmask: case SYS_arch_prctl:
        case SYS_pause: case SYS_set_tid_address: case SYS_futex: case SYS_read: case SYS_readv:
        case SYS_close: case SYS_close_range: case SYS_dup2: case SYS_dup3: case SYS_sigaltstack:
        case SYS_mmap: case SYS_madvise: case SYS_nanosleep: case SYS_clock_nanosleep:
        case SYS_sched_yield: case SYS_prlimit64: case SYS_setrlimit:
            continue;
        }
        syscall(nr, arg(), arg(), arg(), arg(), arg(), arg());
        made++;
    }
    printf("made %ld system calls\n", made);
    return 0;
}
