/* omp_cxx_catch_no: C++ exceptions thrown and caught inside an OpenMP region. Each thread of
 * the team tallies items under a std::mutex whose unlock ends the function (at -O2 a tail call,
 * `jmp pthread_mutex_unlock`, made after the function caught an exception its callee threw),
 * then parses more items in the outlined body itself, whose throw gcc inlines and moves to
 * `main._omp_fn.0.cold` (reached from the body by a jump), and stores its own slot of `out`;
 * main reads `out` after the region. Built -O2 (guests/Makefile). Race: no (the tally is under
 * the mutex, each slot has one writer, and the region's join orders the slots before main's
 * reads). The unwinder leaves the thrower's frames on ferrite's shadow stack (nothing returns
 * through them): a jump from below them must not be taken as a call started in them. */
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <omp.h>

static std::mutex m;
static long tallied;
static int out[2];

__attribute__((noinline)) static int parse(int i)
{
    if (i % 7 == 3)
        throw std::runtime_error("bad item");
    return i;
}

/* Catches what `parse` throws, then unlocks as its last call. */
__attribute__((noinline)) static void tally(int id)
{
    m.lock();
    int s = 0;
    for (int i = 0; i < 40; i++) {
        try {
            s += parse(i + id);
        } catch (const std::exception &) {
            s -= 1;
        }
    }
    tallied += s;
    m.unlock();
}

static inline int check(int i)
{
    if (i % 5 == 2)
        throw std::out_of_range("check");
    return 2 * i;
}

int main()
{
#pragma omp parallel num_threads(2)
    {
        int id = omp_get_thread_num();
        int s = 0;
        for (int i = 0; i < 20; i++) {
            try {
                s += check(i);
            } catch (const std::exception &) {
                s += 100;
            }
        }
        out[id] = s;
        tally(id);
    }
    printf("tallied=%ld out=%d,%d\n", tallied, out[0], out[1]);
    return 0;
}
