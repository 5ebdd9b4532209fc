/* kv_server: a PM key-value server and its clients in one process, over loopback TCP.
 *
 * A server thread runs an epoll event loop: it accepts connections, reads request lines
 * (`set KEY VALUE`, `get KEY`) and queues them for two worker threads, which execute them on a
 * hash table in a PM file and answer on the connection. Two client threads connect and issue N
 * requests each, waiting for each answer; then main stops the server through an eventfd.
 *
 * The planted persistence race: `set` publishes the item's index in its bucket under the
 * bucket's lock, unlocks, acknowledges the client, and persists the bucket only then. Another
 * worker's `get` of the same key loads the bucket under the lock and answers with a value a
 * crash could still lose (HawkSet's pattern: the store's persist is outside its lock).
 * FIXED twin: kv_server_fixed.c, this source built with FIXED (persists before unlocking).
 * Usage: kv_server POOL [N]; prints how many requests were answered, exits 0.
 *
 * The clients record what they were promised: each acknowledged set's value is appended to the
 * client's log in the pool and persisted as the `OK` arrives. `kv_server --check POOL` (the
 * recovery of a crash test) checks that every acknowledged set survived: its item, or a newer
 * item of its bucket, is in the durable table. The planted race breaks that after a crash
 * between a client's record and the late persist; the fixed twin passes on every crash image.
 *
 * As a server alone (`kv_server --serve POOL ADDR`, ADDR `tcp:PORT` or `unix:PATH`): the same
 * event loop and workers for clients in other processes (guests/src/kv_client.c), until one sends
 * `shutdown`; prints how many requests it served, exits 0. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include "kv.h"
#include "pm.h"

#define NBUCKETS 16
#define NITEMS 1024
#define NCLIENTS 2
#define NWORKERS 2

struct item {
    char key[24];
    char val[40];
};

struct bucket {
    volatile uint64_t item; /* sequence number + 1 of the newest item published, 0: empty */
    uint64_t pad[7];
};

#define NACKS 512

/* A client's record of the sets the server acknowledged to it (their values, in order). */
struct acklog {
    uint64_t n;
    uint64_t pad[7];
    char val[NACKS][40];
};

struct root {
    uint64_t next_item; /* items allocated so far; item s is items[s % NITEMS] */
    uint64_t pad[7];
    struct bucket buckets[NBUCKETS];
    struct acklog acks[NCLIENTS];
    struct item items[NITEMS];
};

static struct root *r;
static pthread_mutex_t bucket_lock[NBUCKETS];
static pthread_mutex_t alloc_lock = PTHREAD_MUTEX_INITIALIZER;

/* Requests handed from the event loop to the workers. */
struct job {
    int fd;
    char line[96];
};
static struct job queue[64];
static int q_head, q_len, stopping;
static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_cond = PTHREAD_COND_INITIALIZER;

static int listener, stop_fd;
static struct sockaddr_storage addr;
static socklen_t addr_len = sizeof addr;
static long served;

static unsigned hash(const char *s)
{
    unsigned h = 5381;
    while (*s)
        h = h * 33 + (unsigned char)*s++;
    return h % NBUCKETS;
}

static void answer(int fd, const char *text)
{
    size_t len = strlen(text), done = 0;
    while (done < len) {
        ssize_t n = send(fd, text + done, len - done, MSG_NOSIGNAL);
        if (n < 0 && errno == EAGAIN)
            continue;
        if (n <= 0)
            return;
        done += (size_t)n;
    }
}

static void do_set(int fd, const char *key, const char *val)
{
    pthread_mutex_lock(&alloc_lock);
    uint64_t seq = r->next_item++;
    persist(&r->next_item, sizeof r->next_item);
    pthread_mutex_unlock(&alloc_lock);
    struct item *it = &r->items[seq % NITEMS];
    snprintf(it->key, sizeof it->key, "%s", key);
    snprintf(it->val, sizeof it->val, "%s", val);
    persist(it, sizeof *it);
    unsigned b = hash(key);
    pthread_mutex_lock(&bucket_lock[b]);
    /* A later set of the bucket may have published first: the bucket keeps the newest. */
    uint64_t i = r->buckets[b].item > seq ? r->buckets[b].item - 1 : seq;
#ifdef FIXED
    r->buckets[b].item = i + 1; /* FIX: published and persisted under the lock */
    PM_CLWB(&r->buckets[b].item); PM_SFENCE(); /* PERSIST: before unlocking */
    pthread_mutex_unlock(&bucket_lock[b]);
    answer(fd, "OK\n");
#else
    r->buckets[b].item = i + 1; /* BUG: published under the lock, persisted after the answer */
    pthread_mutex_unlock(&bucket_lock[b]);
    answer(fd, "OK\n");
    PM_CLWB(&r->buckets[b].item); PM_SFENCE(); /* PERSIST: after unlocking and answering */
#endif
}

static void do_get(int fd, const char *key)
{
    unsigned b = hash(key);
    pthread_mutex_lock(&bucket_lock[b]);
    uint64_t i = r->buckets[b].item; /* LOAD: another worker's get */
    pthread_mutex_unlock(&bucket_lock[b]);
    char out[64];
    const struct item *it = &r->items[(i - 1) % NITEMS];
    if (i != 0 && strcmp(it->key, key) == 0)
        snprintf(out, sizeof out, "VALUE %s\n", it->val);
    else
        snprintf(out, sizeof out, "NONE\n");
    answer(fd, out);
}

static void *worker(void *arg)
{
    for (;;) {
        pthread_mutex_lock(&q_lock);
        while (q_len == 0 && !stopping)
            pthread_cond_wait(&q_cond, &q_lock);
        if (q_len == 0) {
            pthread_mutex_unlock(&q_lock);
            return NULL;
        }
        struct job j = queue[q_head];
        q_head = (q_head + 1) % 64;
        q_len--;
        pthread_mutex_unlock(&q_lock);
        char cmd[8], key[24], val[40];
        int n = sscanf(j.line, "%7s %23s %39s", cmd, key, val);
        if (n == 3 && strcmp(cmd, "set") == 0)
            do_set(j.fd, key, val);
        else if (n >= 2 && strcmp(cmd, "get") == 0)
            do_get(j.fd, key);
        else
            answer(j.fd, "ERROR\n");
    }
}

static void push(int fd, const char *line)
{
    pthread_mutex_lock(&q_lock);
    if (q_len < 64) {
        struct job *j = &queue[(q_head + q_len) % 64];
        j->fd = fd;
        size_t len = strnlen(line, sizeof j->line - 1);
        memcpy(j->line, line, len);
        j->line[len] = 0;
        q_len++;
        pthread_cond_signal(&q_cond);
    }
    pthread_mutex_unlock(&q_lock);
}

/* A connection's bytes not yet a whole line. */
struct conn {
    int fd;
    size_t len;
    char buf[256];
};

static void *server(void *arg)
{
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, listener, &ev);
    struct epoll_event sev = {.events = EPOLLIN, .data.ptr = &stop_fd};
    epoll_ctl(ep, EPOLL_CTL_ADD, stop_fd, &sev);
    for (;;) {
        struct epoll_event evs[8];
        int n = epoll_wait(ep, evs, 8, -1);
        for (int k = 0; k < n; k++) {
            if (evs[k].data.ptr == &stop_fd) {
                close(ep);
                return NULL;
            }
            if (evs[k].data.ptr == NULL) {
                int c = accept4(listener, NULL, NULL, SOCK_NONBLOCK);
                if (c < 0)
                    continue;
                struct conn *cn = calloc(1, sizeof *cn);
                cn->fd = c;
                struct epoll_event cev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = cn};
                epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
                continue;
            }
            struct conn *cn = evs[k].data.ptr;
            ssize_t got = read(cn->fd, cn->buf + cn->len, sizeof cn->buf - 1 - cn->len);
            if (got == 0 || (got < 0 && errno != EAGAIN)) {
                epoll_ctl(ep, EPOLL_CTL_DEL, cn->fd, NULL);
                close(cn->fd);
                free(cn);
                continue;
            }
            if (got < 0)
                continue;
            cn->len += (size_t)got;
            cn->buf[cn->len] = 0;
            char *nl;
            while ((nl = strchr(cn->buf, '\n')) != NULL) {
                *nl = 0;
                if (strcmp(cn->buf, "shutdown") == 0) {
                    answer(cn->fd, "BYE\n");
                    close(ep);
                    return NULL;
                }
                served++;
                push(cn->fd, cn->buf);
                size_t rest = cn->len - (size_t)(nl + 1 - cn->buf);
                memmove(cn->buf, nl + 1, rest + 1);
                cn->len = rest;
            }
        }
    }
}

static long requests;
static int answered[NCLIENTS];

/* Client `id` was told its set of `val` is done: it records that in its log, durably. */
static void acked(int id, const char *val)
{
    struct acklog *l = &r->acks[id];
    if (l->n == NACKS)
        return;
    /* Only the bytes written: a flush of a line the record does not reach would be redundant. */
    size_t len = strnlen(val, sizeof l->val[0] - 1);
    memcpy(l->val[l->n], val, len);
    l->val[l->n][len] = 0;
    persist(l->val[l->n], len + 1);
    l->n++;
    persist(&l->n, sizeof l->n);
}

/* The recovery: every set a client recorded as acknowledged is in the durable table (its item,
 * or a newer one, published in its bucket). 0 when so, 1 naming the first lost set. */
static int check(const char *path)
{
    r = pm_map(path, sizeof(struct root));
    if (r->next_item > NITEMS) {
        printf("kv_server: %lu items, more than the table keeps: not checked\n", (unsigned long)r->next_item);
        return 0;
    }
    long sets = 0;
    for (int c = 0; c < NCLIENTS; c++) {
        for (uint64_t j = 0; j < r->acks[c].n && j < NACKS; j++) {
            const char *val = r->acks[c].val[j];
            uint64_t s = 0;
            while (s < r->next_item && strcmp(r->items[s].val, val) != 0)
                s++;
            uint64_t newest = s < r->next_item ? r->buckets[hash(r->items[s].key)].item : 0;
            if (s == r->next_item || newest < s + 1) {
                printf("kv_server: the acknowledged set of %s to %s is lost: its bucket holds item %lu\n",
                       s < r->next_item ? r->items[s].key : "?", val, (unsigned long)newest);
                return 1;
            }
            sets++;
        }
    }
    printf("kv_server: all %ld acknowledged sets are durable\n", sets);
    return 0;
}

static void *client(void *arg)
{
    int id = (int)(long)arg;
    int c = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(c, (struct sockaddr *)&addr, addr_len) != 0)
        return NULL;
    answered[id] = (int)kv_client_requests(c, id, requests, acked);
    close(c);
    return NULL;
}

/* The pool formatted, the bucket locks made. */
static void start(const char *path)
{
    r = pm_map(path, sizeof(struct root));
    /* The items are not cleared: each is written whole by the worker that allocates it. */
    memset(r, 0, offsetof(struct root, items));
    persist(r, offsetof(struct root, items));
    for (int b = 0; b < NBUCKETS; b++)
        pthread_mutex_init(&bucket_lock[b], NULL);
}

/* The listening socket at `addr` (a loopback port of the kernel's choice when it names none),
 * the event loop's thread and the workers. */
static int serve(pthread_t *srv, pthread_t *w)
{
    listener = socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (bind(listener, (struct sockaddr *)&addr, addr_len) != 0 || listen(listener, 8) != 0 ||
        getsockname(listener, (struct sockaddr *)&addr, &addr_len) != 0) {
        perror("kv_server: listen");
        return -1;
    }
    stop_fd = eventfd(0, 0);
    pthread_create(srv, NULL, server, NULL);
    for (int k = 0; k < NWORKERS; k++)
        pthread_create(&w[k], NULL, worker, NULL);
    return 0;
}

/* The workers finish what is queued and go. */
static void stop_workers(pthread_t *w)
{
    pthread_mutex_lock(&q_lock);
    stopping = 1;
    pthread_cond_broadcast(&q_cond);
    pthread_mutex_unlock(&q_lock);
    for (int k = 0; k < NWORKERS; k++)
        pthread_join(w[k], NULL);
}

int main(int argc, char **argv)
{
    pthread_t srv, w[NWORKERS], cl[NCLIENTS];
    if (argc == 3 && strcmp(argv[1], "--check") == 0)
        return check(argv[2]);
    if (argc > 1 && strcmp(argv[1], "--serve") == 0) {
        if (argc < 4 || kv_address(argv[3], &addr, &addr_len) != 0) {
            fprintf(stderr, "usage: kv_server --serve POOL tcp:PORT|unix:PATH\n");
            return 2;
        }
        start(argv[2]);
        if (serve(&srv, w) != 0)
            return 2;
        pthread_join(srv, NULL);
        stop_workers(w);
        if (addr.ss_family == AF_UNIX)
            unlink(((struct sockaddr_un *)&addr)->sun_path);
        printf("kv_server: %ld requests served\n", served);
        return 0;
    }
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    requests = argc > 2 ? atol(argv[2]) : 20;
    start(path);
    struct sockaddr_in *in = (struct sockaddr_in *)&addr;
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr_len = sizeof *in;
    if (serve(&srv, w) != 0)
        return 2;
    for (long k = 0; k < NCLIENTS; k++)
        pthread_create(&cl[k], NULL, client, (void *)k);
    for (int k = 0; k < NCLIENTS; k++)
        pthread_join(cl[k], NULL);
    uint64_t one = 1;
    if (write(stop_fd, &one, sizeof one) != sizeof one)
        return 2;
    pthread_join(srv, NULL);
    stop_workers(w);
    int total = 0;
    for (int k = 0; k < NCLIENTS; k++)
        total += answered[k];
    printf("kv: %d of %ld requests answered\n", total, NCLIENTS * requests);
    return total != NCLIENTS * requests;
}
