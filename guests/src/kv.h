/* kv.h: the text protocol of kv_server and its clients: where a server listens (loopback TCP on
 * a port, or an AF_UNIX path) and one client connection issuing requests.
 *
 * A request is a line, `set KEY VALUE` or `get KEY`; the answer a line, `OK`, `VALUE V`, `NONE`
 * or `ERROR`. `shutdown` stops a server started with --serve (answered `BYE`). */
#ifndef KV_H
#define KV_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* `tcp:PORT` (127.0.0.1) or `unix:PATH` into a socket address; 0 on success. */
static inline int kv_address(const char *where, struct sockaddr_storage *ss, socklen_t *len)
{
    memset(ss, 0, sizeof *ss);
    if (strncmp(where, "tcp:", 4) == 0) {
        struct sockaddr_in *in = (struct sockaddr_in *)ss;
        in->sin_family = AF_INET;
        in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        in->sin_port = htons((unsigned short)atoi(where + 4));
        *len = sizeof *in;
        return 0;
    }
    if (strncmp(where, "unix:", 5) == 0 && strlen(where + 5) < sizeof ((struct sockaddr_un *)0)->sun_path) {
        struct sockaddr_un *un = (struct sockaddr_un *)ss;
        un->sun_family = AF_UNIX;
        strcpy(un->sun_path, where + 5);
        *len = sizeof *un;
        return 0;
    }
    return -1;
}

/* A connection to `addr`, retried while no server listens there yet (a server started beside
 * its client may not have bound its socket): -1 after about a second. */
static inline int kv_connect(const struct sockaddr *addr, socklen_t len)
{
    for (int tries = 0; tries < 1000; tries++) {
        int c = socket(addr->sa_family, SOCK_STREAM, 0);
        if (c < 0)
            return -1;
        if (connect(c, addr, len) == 0)
            return c;
        int e = errno;
        close(c);
        if (e != ECONNREFUSED && e != ENOENT)
            return -1;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    return -1;
}

/* Sends `req` and reads the one-line answer into `resp` (without its newline). */
static inline int kv_request(int c, const char *req, char *resp, size_t size)
{
    size_t len = strlen(req);
    if (send(c, req, len, 0) != (ssize_t)len)
        return -1;
    size_t got = 0;
    while (got < size - 1) {
        ssize_t n = recv(c, resp + got, 1, 0);
        if (n <= 0)
            return -1;
        if (resp[got] == '\n')
            break;
        got++;
    }
    resp[got] = 0;
    return 0;
}

/* Client `id`'s `requests` requests over connection `c`, alternating sets and gets of four keys
 * (the keys the other clients use too): how many were answered as the protocol says. Each set
 * the server acknowledged is passed to `acked` (when not NULL) with its value, as a client that
 * records what the server promised it would. */
static inline long kv_client_requests(int c, int id, long requests, void (*acked)(int id, const char *val))
{
    long answered = 0;
    char req[96], resp[96], val[40];
    for (long i = 0; i < requests; i++) {
        if (i % 2 == 0) {
            snprintf(val, sizeof val, "v%d_%ld", id, i);
            snprintf(req, sizeof req, "set k%ld %s\n", (i / 2) % 4, val);
        } else {
            snprintf(req, sizeof req, "get k%ld\n", (i / 2 + id) % 4);
        }
        if (kv_request(c, req, resp, sizeof resp) != 0)
            break;
        answered += strcmp(resp, "OK") == 0 || strncmp(resp, "VALUE ", 6) == 0 || strcmp(resp, "NONE") == 0;
        if (acked && i % 2 == 0 && strcmp(resp, "OK") == 0)
            acked(id, val);
    }
    return answered;
}

#endif
