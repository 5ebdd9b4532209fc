/* pr_mc_incr_fixed: FIXED twin of pr_mc_incr.c.  incr persists the item (value and length,
 * one cache line) inside the item lock, so append (same barriers, same rounds) only ever copies
 * durable digits into its new item.
 * Usage: pr_mc_incr_fixed [POOL]        prints the number of items and the current value, exits 0
 *        pr_mc_incr_fixed POOL recover  opens the existing pool, reads the current item, prints
 *                                       `recovered: VALUE` (`recovered: bad slab` if the header
 *                                       or the item is malformed), exits 0 */
#include <pthread.h>

#include "pm.h"

#define ROUNDS 4
#define POOL_SIZE 4096
#define NITEMS 16
#define KEY 42

struct item { /* one cache line */
    uint64_t key;
    uint64_t len; /* strlen(val) */
    char val[48];
};

struct slab {
    volatile uint64_t nitems; /* items allocated */
    volatile uint64_t cur;    /* index of the current item for KEY */
    uint64_t pad[6];
    struct item items[NITEMS];
};

static struct slab *s;
static pthread_mutex_t item_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t bar;

static void *incr(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        pthread_mutex_lock(&item_lock);
        struct item *it = &s->items[s->cur];
        unsigned long long n = strtoull(it->val, NULL, 10) + 1;
        it->len = (uint64_t)snprintf(it->val, sizeof it->val, "%llu", n); /* PR: source store */
        PM_CLWB(it); PM_SFENCE(); /* FIX: incr persists the value */
        pthread_mutex_unlock(&item_lock);
        pthread_barrier_wait(&bar); /* append runs now */
        pthread_barrier_wait(&bar);
    }
    return NULL;
}

static void *append(void *arg)
{
    (void)arg;
    char buf[sizeof s->items[0].val]; /* DRAM */
    for (int i = 0; i < ROUNDS; i++) {
        pthread_barrier_wait(&bar);
        pthread_mutex_lock(&item_lock);
        struct item *old = &s->items[s->cur];
        memcpy(buf, old->val, sizeof buf); /* PR: load */
        uint64_t len = old->len;
        if (len + 1 < sizeof buf) {
            buf[len] = '0';
            buf[len + 1] = '\0';
            uint64_t idx = s->nitems;
            struct item *n = &s->items[idx];
            n->key = old->key;
            n->len = len + 1;
            memcpy(n->val, buf, sizeof buf); /* PR: side effect */
            PM_CLWB(n); PM_SFENCE();
            s->nitems = idx + 1;
            s->cur = idx;
            PM_CLWB(s); PM_SFENCE();
        }
        pthread_mutex_unlock(&item_lock);
        pthread_barrier_wait(&bar);
    }
    return NULL;
}

static int recover(const char *path)
{
    s = pm_open(path, POOL_SIZE, 0);
    uint64_t cur = s->cur;
    if (s->nitems > NITEMS || cur >= s->nitems) {
        puts("recovered: bad slab");
        return 0;
    }
    struct item *it = &s->items[cur];
    if (it->key != KEY || it->len >= sizeof it->val || strlen(it->val) != it->len) {
        puts("recovered: bad slab");
        return 0;
    }
    printf("recovered: %s\n", it->val);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    if (argc > 2 && strcmp(argv[2], "recover") == 0)
        return recover(path);
    s = pm_map(path, POOL_SIZE);
    struct item *it = &s->items[0];
    memset(it, 0, sizeof *it);
    it->key = KEY;
    it->len = 1;
    it->val[0] = '1';
    PM_CLWB(it); PM_SFENCE();
    s->nitems = 1;
    s->cur = 0;
    PM_CLWB(s); PM_SFENCE();
    pthread_barrier_init(&bar, NULL, 2);
    pthread_t a, b;
    pthread_create(&a, NULL, incr, NULL);
    pthread_create(&b, NULL, append, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("items %llu, value %s\n", (unsigned long long)s->nitems, s->items[s->cur].val);
    return 0;
}
