/* pm.h - minimal persistent-memory helpers for ferrite's PM guests.
 *
 * No PMDK: every persistence instruction is emitted with inline asm.
 *
 * Two spellings are provided for each instruction:
 *   - UPPER-CASE macros (PM_CLWB, PM_SFENCE, ...): the instruction is expanded
 *     at the call site, so the DWARF line table attributes it directly to the
 *     line that uses the macro.  Guests use these on lines carrying a marker
 *     comment (BUG:/FIX:/INSN:) so the instruction's address maps to the marked
 *     line without needing inlined-frame information.
 *   - lower-case static inline functions (clwb(), sfence(), persist(), ...), as
 *     a conventional API.  They are always_inline, so the instructions end up in
 *     the caller, but the line table attributes them to this header (with an
 *     inlined-subroutine record pointing at the caller).
 */
#ifndef FERRITE_PM_H
#define FERRITE_PM_H

#include <emmintrin.h> /* __m128i */
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PM_CACHELINE 64
#define PM_DEFAULT_POOL "/mnt/pmem0/pool"

/* Instruction macros (expanded at the use site). */
#define PM_CLWB(p)       __asm__ volatile("clwb %0" : "+m"(*(volatile char *)(p)) :: "memory")
#define PM_CLFLUSHOPT(p) __asm__ volatile("clflushopt %0" : "+m"(*(volatile char *)(p)) :: "memory")
#define PM_CLFLUSH(p)    __asm__ volatile("clflush %0" : "+m"(*(volatile char *)(p)) :: "memory")
#define PM_SFENCE()      __asm__ volatile("sfence" ::: "memory")
#define PM_MFENCE()      __asm__ volatile("mfence" ::: "memory")
/* Non-temporal stores: movnti of a 64-bit value to *(uint64_t *)p, movntdq of
 * a __m128i (16-byte aligned p).  (The _mm_stream_* intrinsics would be
 * attributed to the compiler's header, hence inline asm.) */
#define PM_MOVNTI64(p, v) \
    __asm__ volatile("movnti %1, %0" : "=m"(*(uint64_t *)(p)) : "r"((uint64_t)(v)) : "memory")
#define PM_MOVNTDQ(p, v) \
    __asm__ volatile("movntdq %1, %0" : "=m"(*(__m128i *)(p)) : "x"(v) : "memory")

#define PM_ALWAYS_INLINE static inline __attribute__((always_inline, unused))

PM_ALWAYS_INLINE void clwb(void *p) { PM_CLWB(p); }
PM_ALWAYS_INLINE void clflushopt(void *p) { PM_CLFLUSHOPT(p); }
PM_ALWAYS_INLINE void clflush(void *p) { PM_CLFLUSH(p); }
PM_ALWAYS_INLINE void sfence(void) { PM_SFENCE(); }
PM_ALWAYS_INLINE void mfence(void) { PM_MFENCE(); }

/* clwb every 64-byte line overlapping [addr, addr+len), then sfence. */
PM_ALWAYS_INLINE void persist(void *addr, size_t len)
{
    uintptr_t p = (uintptr_t)addr & ~(uintptr_t)(PM_CACHELINE - 1);
    uintptr_t end = (uintptr_t)addr + len;
    for (; p < end; p += PM_CACHELINE)
        PM_CLWB((void *)p);
    PM_SFENCE();
}

/* Map `size` bytes of the file at `path` MAP_SHARED.  With create != 0 the
 * file is created if needed and ftruncate'd to `size` (existing contents up
 * to `size` are kept).  With create == 0 the file must already exist and be at
 * least `size` bytes long; it is neither truncated nor modified.  Exits with
 * status 2 and a message on stderr on any failure. */
static __attribute__((unused)) void *pm_open(const char *path, size_t size, int create)
{
    int fd = open(path, create ? (O_CREAT | O_RDWR) : O_RDWR, 0644);
    if (fd < 0) {
        perror("pm_map: open");
        exit(2);
    }
    if (create) {
        if (ftruncate(fd, (off_t)size) != 0) {
            perror("pm_map: ftruncate");
            exit(2);
        }
    } else {
        struct stat st;
        if (fstat(fd, &st) != 0) {
            perror("pm_map: fstat");
            exit(2);
        }
        if ((size_t)st.st_size < size) {
            fprintf(stderr, "pm_map: pool too small\n");
            exit(2);
        }
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        perror("pm_map: mmap");
        exit(2);
    }
    close(fd);
    return p;
}

static __attribute__((unused)) void *pm_map(const char *path, size_t size)
{
    return pm_open(path, size, 1);
}

#endif
