/* pm_fsync_log_fixed: records appended to a regular file, committed by a
 * counter in persistent memory.
 *
 * FIXED twin of pm_fsync_log.c: append() fsyncs the record before it persists
 * the counter that covers it, so a durable counter never points past the
 * durable end of the file.
 *
 * Layout (pool file, 4096 bytes, mapped MAP_SHARED): offset 0: uint64_t count,
 * alone in its 64-byte line.  Log (a regular file, argv[2], default
 * pm_fsync_log.txt in the working directory): RECORD-byte records
 * "record %08d\n".
 *
 * Usage: pm_fsync_log_fixed [POOL [LOG]] [recover]
 *   normal mode:  (re)initialises the pool (count = 0, persisted) and the log
 *                 (O_TRUNC), appends NRECORDS records, prints
 *                 "log has N records", exits 0.
 *   recover mode: stats the log, then opens the existing pool (never
 *                 written) and the log; fails
 *                 (exit 1, "recovery: count N but the log holds M records" or
 *                 "recovery: record I corrupt") unless the log holds every
 *                 record the count covers; then repairs the log by cutting it
 *                 to `count` records, writes "recovered N" to recovered.txt in
 *                 the working directory, prints "recovery ok: N records",
 *                 exits 0.  A missing log holds no record.
 */
#include "pm.h"

#define POOL_SIZE 4096
#define NRECORDS 4
#define RECORD 16

struct pool {
    uint64_t count;
};

static void record_text(char *buf, uint64_t i)
{
    char tmp[32];
    snprintf(tmp, sizeof tmp, "record %08llu\n", (unsigned long long)i);
    memcpy(buf, tmp, RECORD);
}

__attribute__((noinline)) static void append(struct pool *p, int fd, uint64_t i)
{
    char rec[RECORD];
    record_text(rec, i);
    if (write(fd, rec, RECORD) != RECORD) {
        perror("write");
        exit(2);
    }
    if (fsync(fd) != 0) { /* FIX: the record durable before the counter */
        perror("fsync");
        exit(2);
    }
    p->count = i + 1; PM_CLWB(&p->count); PM_SFENCE(); /* COMMIT: the counter persisted */
}

static int recover(const char *pool, const char *log)
{
    /* How much of the log survived (before the pool is even opened). */
    struct stat st;
    off_t size = stat(log, &st) == 0 ? st.st_size : 0;
    struct pool *p = pm_open(pool, POOL_SIZE, 0);
    uint64_t n = p->count;
    int fd = open(log, O_RDWR);
    if ((uint64_t)size / RECORD < n) {
        printf("recovery: count %llu but the log holds %llu records\n", (unsigned long long)n,
               (unsigned long long)(size / RECORD));
        return 1;
    }
    for (uint64_t i = 0; i < n; i++) {
        char want[RECORD], got[RECORD];
        record_text(want, i);
        if (pread(fd, got, RECORD, (off_t)(i * RECORD)) != RECORD || memcmp(want, got, RECORD) != 0) {
            printf("recovery: record %llu corrupt\n", (unsigned long long)i);
            return 1;
        }
    }
    /* Repair: the records past the counter were never committed. */
    if (fd >= 0 && ftruncate(fd, (off_t)(n * RECORD)) != 0) {
        perror("ftruncate");
        return 2;
    }
    FILE *mark = fopen("recovered.txt", "w");
    if (mark == NULL) {
        perror("recovered.txt");
        return 2;
    }
    fprintf(mark, "recovered %llu\n", (unsigned long long)n);
    fclose(mark);
    printf("recovery ok: %llu records\n", (unsigned long long)n);
    return 0;
}

int main(int argc, char **argv)
{
    const char *pool = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    const char *log = argc > 2 && strcmp(argv[2], "recover") != 0 ? argv[2] : "pm_fsync_log.txt";
    if (strcmp(argv[argc - 1], "recover") == 0 && argc > 2)
        return recover(pool, log);

    struct pool *p = pm_map(pool, POOL_SIZE);
    p->count = 0;
    persist(&p->count, sizeof p->count);
    int fd = open(log, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0) {
        perror(log);
        return 2;
    }
    for (uint64_t i = 0; i < NRECORDS; i++)
        append(p, fd, i);
    close(fd);
    printf("log has %llu records\n", (unsigned long long)p->count);
    return 0;
}
