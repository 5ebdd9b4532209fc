/* A curl-like HTTP/1.0 client for server tests: `http_get tcp:PORT PATH [N]` connects to
 * 127.0.0.1:PORT (retrying every 10 ms, up to 60 s, while nothing listens yet), sends N GET
 * requests for PATH, one connection each, reads each answer to EOF, checks its status line and
 * prints the status and the body's size. Exits 0 when every answer was 200, 1 otherwise, 2 on
 * bad arguments or when the server never listened. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int connect_retrying(int port) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int tries = 0; tries < 6000; tries++) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        if (s < 0)
            return -1;
        if (connect(s, (struct sockaddr *)&a, sizeof a) == 0)
            return s;
        int e = errno;
        close(s);
        if (e != ECONNREFUSED && e != ENOENT)
            return -1;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    return -1;
}

static int send_all(int s, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = send(s, p, n, 0);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int main(int argc, char **argv) {
    int port;
    if (argc < 3 || sscanf(argv[1], "tcp:%d", &port) != 1 || port <= 0 || port > 65535) {
        fprintf(stderr, "usage: http_get tcp:PORT PATH [N]\n");
        return 2;
    }
    const char *path = argv[2];
    int n = argc > 3 ? atoi(argv[3]) : 1;
    int failures = 0;
    for (int i = 0; i < n; i++) {
        int s = connect_retrying(port);
        if (s < 0) {
            printf("connect: %s\n", strerror(errno));
            return 2;
        }
        char req[512];
        int len = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: 127.0.0.1:%d\r\nUser-Agent: http_get\r\n\r\n",
                           path, port);
        if (send_all(s, req, (size_t)len) != 0) {
            printf("send: %s\n", strerror(errno));
            return 1;
        }
        size_t cap = 1 << 16, got = 0;
        char *buf = malloc(cap);
        for (;;) {
            if (got == cap)
                buf = realloc(buf, cap *= 2);
            ssize_t r = recv(s, buf + got, cap - got, 0);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                break;
            got += (size_t)r;
        }
        close(s);
        int status = 0;
        char *end = memmem(buf, got, "\r\n\r\n", 4);
        if (got < 12 || sscanf(buf, "HTTP/%*d.%*d %d", &status) != 1 || end == NULL) {
            printf("GET %s: malformed answer (%zu bytes)\n", path, got);
            failures++;
        } else {
            size_t body = got - (size_t)(end + 4 - buf);
            printf("GET %s: %d, %zu bytes\n", path, status, body);
            if (status != 200)
                failures++;
        }
        free(buf);
    }
    return failures ? 1 : 0;
}
