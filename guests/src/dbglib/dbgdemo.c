/* libdbgdemo.so: a shared library the debug-file tests strip and give back its debug
 * information in a separate file (tests/debug_files.rs builds it; the guests Makefile does not).
 * dbg_fault is exported; poke is a local function, named only by the library's .symtab, which
 * stripping moves to the debug file. */

#include <stddef.h>

int dbg_calls;

__attribute__((noinline)) static void poke(int *p, int v)
{
    dbg_calls++;
    *p = v; /* LIB FAULT */
}

void dbg_fault(int *p)
{
    poke(p, 42); /* LIB CALL */
    dbg_calls++;
}
