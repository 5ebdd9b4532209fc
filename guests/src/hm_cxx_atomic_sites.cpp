// hm_cxx_atomic_sites: two data races whose reads go through one function of a system header
// (std::atomic<long>::load, a function of the program's own code at -O0, in
// <bits/atomic_base.h>), each racing with a plain write of another thread. Findings are grouped
// by the program's sites: the two races are two findings at their own lines (READ_A against
// WRITE_A, READ_B against WRITE_B), not one finding at the header's line; and each race is one
// finding whichever of its two accesses came first (at seed 0, main's read comes first in the
// first round and the writer's write in the second).
// Usage: hm_cxx_atomic_sites; exits 0.
#include <atomic>
#include <pthread.h>

struct slot {
    std::atomic<long> v;
    long pad[7];
};

static slot a, b;
static pthread_barrier_t bar;

static void write_both(long n)
{
    *reinterpret_cast<volatile long *>(&a.v) = n; /* WRITE_A */
    *reinterpret_cast<volatile long *>(&b.v) = n; /* WRITE_B */
}

static long read_a() { return a.v.load(std::memory_order_relaxed); /* READ_A */ }
static long read_b() { return b.v.load(std::memory_order_relaxed); /* READ_B */ }

static void *writer(void *)
{
    write_both(1);
    // The barrier orders nothing the race passes see as protecting a.v and b.v: main reads
    // them both before and after it, unordered with both writes.
    pthread_barrier_wait(&bar);
    write_both(2);
    return nullptr;
}

int main()
{
    pthread_barrier_init(&bar, nullptr, 2);
    pthread_t t;
    pthread_create(&t, nullptr, writer, nullptr);
    long s = read_a() + read_b();
    pthread_barrier_wait(&bar);
    s += read_a() + read_b();
    pthread_join(t, nullptr);
    return s < 0;
}
