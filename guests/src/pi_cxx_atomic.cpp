// pi_cxx_atomic: pi_unlock_persist's race (a PM value stored under a mutex, persisted after the
// unlock, loaded under the mutex by another thread) written with C++ std::atomic, whose store
// and load are functions of libstdc++'s headers compiled into the program (std::atomic<T>::store
// in <bits/atomic_base.h>): the race must be reported at the program's lines, not the header's.
//   - BUG (this file): the value is persisted after the unlock (the STORE and LOAD lines).
//   - FIXED (pi_cxx_atomic_fixed, built with -DFIXED): persisted before the unlock: silent.
// Usage: pi_cxx_atomic [POOL]; exits 0.
#include <atomic>
#include <new>
#include <pthread.h>

#include "pm.h"

struct root {
    std::atomic<uint64_t> value;
    uint64_t pad[7];
};

static root *r;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t bar;
static uint64_t seen;

static void *writer(void *)
{
    pthread_mutex_lock(&lock);
    r->value.store(42, std::memory_order_release); /* STORE: under the lock */
#ifdef FIXED
    PM_CLWB(&r->value); PM_SFENCE(); /* FIX: persisted before the unlock */
#endif
    pthread_mutex_unlock(&lock);
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar);
#ifndef FIXED
    PM_CLWB(&r->value); PM_SFENCE(); /* PERSIST: after the unlock */
#endif
    return nullptr;
}

static void *reader(void *)
{
    pthread_barrier_wait(&bar);
    pthread_mutex_lock(&lock);
    seen = r->value.load(std::memory_order_acquire); /* LOAD: under the lock */
    pthread_mutex_unlock(&lock);
    pthread_barrier_wait(&bar);
    return nullptr;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    r = new (pm_map(path, 4096)) root;
    r->value.store(0);
    PM_CLWB(&r->value); PM_SFENCE();
    pthread_barrier_init(&bar, nullptr, 2);
    pthread_t w, rd;
    pthread_create(&w, nullptr, writer, nullptr);
    pthread_create(&rd, nullptr, reader, nullptr);
    pthread_join(w, nullptr);
    pthread_join(rd, nullptr);
    printf("value %llu, reader saw %llu\n", (unsigned long long)r->value.load(), (unsigned long long)seen);
    return 0;
}
