/* pmdk_tls_stage: worker threads build records in a thread-local (__thread) staging buffer and
 * hand them to one flusher thread through a mutex-protected queue of pointers (DRAM); the
 * flusher copies each record into a libpmem log with memcpy and makes it durable with
 * pmem_persist, then publishes it by bumping the log's durable `count`; the worker waits for its
 * record to be flushed before reusing its buffer (a condition variable). Dynamically linked
 * against libpmem, built -O2. Recovery checks that every record below `count` is whole.
 *   - BUG (without FIXED): the flusher persists only the count (COUNT_PERSIST) and leaves the
 *     memcpy'd record to the cache (COPY_BUG): a crash can leave a durable count over a record
 *     that never reached PM, and at exit the records are still unpersisted.
 *   - FIXED (pmdk_tls_stage_fixed): pmem_persist of the record before the count is bumped.
 * Usage: pmdk_tls_stage [POOL]          creates the pool and runs the workers and the flusher
 *        pmdk_tls_stage POOL recover    `recovery ok: N records` (exit 0) or `recovery: ...` (1) */
#include <libpmem.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define WORKERS 3
#define PER_WORKER 4
#define RECORDS (WORKERS * PER_WORKER)
#define WORDS 12
#define MAGIC 0x544c5353u

struct record {
    uint64_t worker;
    uint64_t seq;
    uint64_t w[WORDS];
    uint64_t sum; /* of the words above */
};

struct log {
    uint64_t magic;
    uint64_t count;
    uint64_t pad[6];
    struct record rec[RECORDS];
};

static struct log *plog;
static __thread struct record staging; /* TLS_BUFFER */
static __thread int staging_busy;

static pthread_mutex_t qlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t qcond = PTHREAD_COND_INITIALIZER;
static pthread_cond_t flushed = PTHREAD_COND_INITIALIZER;
static struct {
    struct record *rec;
    int *busy;
} queue[RECORDS];
static unsigned qhead, qtail;

static uint64_t sum_of(const struct record *r)
{
    uint64_t s = r->worker * 31 + r->seq;
    for (unsigned j = 0; j < WORDS; j++)
        s = s * 1099511628211ull + r->w[j];
    return s;
}

static void *worker(void *arg)
{
    uint64_t id = (uint64_t)(uintptr_t)arg;
    for (unsigned i = 0; i < PER_WORKER; i++) {
        staging.worker = id;
        staging.seq = i;
        for (unsigned j = 0; j < WORDS; j++)
            staging.w[j] = (id + 1) * 1000003u + i * 131u + j;
        staging.sum = sum_of(&staging);
        pthread_mutex_lock(&qlock);
        staging_busy = 1;
        queue[qtail].rec = &staging;
        queue[qtail].busy = &staging_busy;
        qtail++;
        pthread_cond_signal(&qcond);
        while (staging_busy) /* the buffer is the flusher's until it says so */
            pthread_cond_wait(&flushed, &qlock);
        pthread_mutex_unlock(&qlock);
    }
    return NULL;
}

static void *flusher(void *arg)
{
    (void)arg;
    for (unsigned n = 0; n < RECORDS; n++) {
        pthread_mutex_lock(&qlock);
        while (qhead == qtail)
            pthread_cond_wait(&qcond, &qlock);
        struct record *src = queue[qhead].rec;
        int *busy = queue[qhead].busy;
        qhead++;
        pthread_mutex_unlock(&qlock);
        uint64_t c = plog->count;
        memcpy(&plog->rec[c], src, sizeof *src); /* COPY_BUG: copied from the worker's TLS buffer */
#ifdef FIXED
        pmem_persist(&plog->rec[c], sizeof *src); /* FIX: the record durable before it is counted */
#endif
        plog->count = c + 1;
        pmem_persist(&plog->count, sizeof plog->count); /* COUNT_PERSIST */
        pthread_mutex_lock(&qlock);
        *busy = 0;
        pthread_cond_broadcast(&flushed);
        pthread_mutex_unlock(&qlock);
    }
    return NULL;
}

static int recover(void)
{
    if (plog->magic != MAGIC) {
        printf("recovery ok: not formatted\n");
        return 0;
    }
    for (uint64_t i = 0; i < plog->count && i < RECORDS; i++) {
        if (plog->rec[i].sum != sum_of(&plog->rec[i]) || plog->rec[i].worker >= WORKERS) {
            printf("recovery: record %llu torn\n", (unsigned long long)i);
            return 1;
        }
    }
    printf("recovery ok: %llu records\n", (unsigned long long)plog->count);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/tlsstage";
    int recovering = argc > 2 && strcmp(argv[2], "recover") == 0;
    size_t len;
    int is_pmem;
    plog = pmem_map_file(path, recovering ? 0 : sizeof(struct log), recovering ? 0 : PMEM_FILE_CREATE, 0644, &len, &is_pmem);
    if (!plog) {
        if (recovering) {
            printf("recovery ok: no pool\n");
            return 0;
        }
        perror(path);
        return 1;
    }
    if (recovering) {
        if (len < sizeof(struct log)) {
            printf("recovery ok: no pool\n");
            return 0;
        }
        return recover();
    }
    pmem_memset_persist(plog, 0, sizeof *plog);
    plog->magic = MAGIC;
    pmem_persist(&plog->magic, sizeof plog->magic);
    pthread_t f, w[WORKERS];
    pthread_create(&f, NULL, flusher, NULL);
    for (unsigned i = 0; i < WORKERS; i++)
        pthread_create(&w[i], NULL, worker, (void *)(uintptr_t)i);
    for (unsigned i = 0; i < WORKERS; i++)
        pthread_join(w[i], NULL);
    pthread_join(f, NULL);
    uint64_t ok = 0;
    for (uint64_t i = 0; i < plog->count; i++)
        ok += plog->rec[i].sum == sum_of(&plog->rec[i]);
    printf("flushed: %llu records, %llu whole\n", (unsigned long long)plog->count, (unsigned long long)ok);
    pmem_unmap(plog, len);
    return ok == RECORDS ? 0 : 1;
}
