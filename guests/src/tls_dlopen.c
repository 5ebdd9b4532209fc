/* tls_dlopen: thread-local variables of libraries loaded by dlopen, for gdb's `p` through
 * ferrite's server (qGetTLSAddr). Dynamic only (build/tls_dlopen.dyn), with two libraries of its
 * own (src/lib/tls_lib_a.c: build/libtls_lib_a.so and libtls_lib_b.so), found through the
 * program's $ORIGIN run path. It loads A, then B, unloads A and loads it again: the dynamic
 * linker hands A the TLS module id it freed, lower than B's, although A now comes after B in the
 * link map (so a module's id is not its rank there). The main thread sets A's variable to 11 and
 * B's to 12, a second thread sets them to 42 and 43; each thread then calls stop_here(). Exits 0. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

static void (*set_a)(int), (*set_b)(int);
static int (*get_a)(void), (*get_b)(void);

__attribute__((noinline)) void stop_here(int seen)
{
    __asm__ volatile("" : : "r"(seen) : "memory");
}

static void *load(const char *name)
{
    void *h = dlopen(name, RTLD_NOW);
    if (!h)
        fprintf(stderr, "tls_dlopen: %s\n", dlerror());
    return h;
}

static void *worker(void *arg)
{
    (void)arg;
    set_a(42);
    set_b(43);
    stop_here(get_a() + get_b());
    return NULL;
}

int main(void)
{
    void *a = load("libtls_lib_a.so");
    if (!a)
        return 1;
    void (*first)(int) = (void (*)(int))dlsym(a, "lib_a_set");
    first(1); /* A's block in this thread, freed with A */
    void *b = load("libtls_lib_b.so");
    if (!b || dlclose(a) != 0)
        return 1;
    a = load("libtls_lib_a.so");
    if (!a)
        return 1;
    set_a = (void (*)(int))dlsym(a, "lib_a_set");
    get_a = (int (*)(void))dlsym(a, "lib_a_get");
    set_b = (void (*)(int))dlsym(b, "lib_b_set");
    get_b = (int (*)(void))dlsym(b, "lib_b_get");
    if (!set_a || !get_a || !set_b || !get_b)
        return 1;
    set_a(11);
    set_b(12);
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
    stop_here(get_a() + get_b());
    printf("a %d b %d\n", get_a(), get_b());
    return 0;
}
