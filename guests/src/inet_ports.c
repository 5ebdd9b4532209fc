/* inet_ports: how IPv4 and IPv6 TCP/UDP sockets share loopback ports on Linux (with the
 * default net.ipv6.bindv6only = 0), as servers such as Redis (`bind * -::*`: 0.0.0.0 and then
 * :: with IPV6_V6ONLY on one port) and Python's dual-stack http.server rely on. Prints one line
 * per rule, without port numbers, so natively (on a host with IPv6 loopback) and under ferrite
 * the output is the same. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void show(const char *what, int r)
{
    printf("%s: %s\n", what, r < 0 ? strerror(errno) : "ok");
}

static struct sockaddr_in v4(unsigned port, unsigned addr)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(addr)};
    return a;
}

static struct sockaddr_in6 v6(unsigned port, const char *addr)
{
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
    inet_pton(AF_INET6, addr, &a.sin6_addr);
    return a;
}

static int sock(int domain, int type, int v6only)
{
    int s = socket(domain, type, 0);
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (v6only >= 0)
        setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only);
    return s;
}

static unsigned port_of(int s)
{
    struct sockaddr_storage ss;
    socklen_t n = sizeof ss;
    getsockname(s, (struct sockaddr *)&ss, &n);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

/* Accepts without blocking on `l` and prints the peer's family and address. */
static void take(const char *what, int l)
{
    fcntl(l, F_SETFL, O_NONBLOCK);
    struct sockaddr_storage ss;
    socklen_t n = sizeof ss;
    int c = accept(l, (struct sockaddr *)&ss, &n);
    if (c < 0) {
        printf("%s: %s\n", what, strerror(errno));
        return;
    }
    char text[INET6_ADDRSTRLEN] = "?";
    if (ss.ss_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, text, sizeof text);
    else
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, text, sizeof text);
    struct sockaddr_storage me;
    n = sizeof me;
    getsockname(c, (struct sockaddr *)&me, &n);
    printf("%s: peer %s %s, local family %s\n", what, ss.ss_family == AF_INET ? "AF_INET" : "AF_INET6", text,
           me.ss_family == AF_INET ? "AF_INET" : "AF_INET6");
    close(c);
}

int main(void)
{
    int probe = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 lo6 = v6(0, "::1");
    if (probe < 0 || bind(probe, (struct sockaddr *)&lo6, sizeof lo6) < 0) {
        printf("no IPv6 loopback\n");
        return 0;
    }
    close(probe);

    /* An AF_INET wildcard listener and an IPV6_V6ONLY one on the same port. */
    int a = sock(AF_INET, SOCK_STREAM, -1);
    struct sockaddr_in any4 = v4(0, INADDR_ANY);
    show("bind 0.0.0.0:0", bind(a, (struct sockaddr *)&any4, sizeof any4));
    unsigned p = port_of(a);
    listen(a, 8);
    int b = sock(AF_INET6, SOCK_STREAM, 1);
    struct sockaddr_in6 any6 = v6(p, "::");
    show("bind [::]:P v6only", bind(b, (struct sockaddr *)&any6, sizeof any6));
    listen(b, 8);
    int c = sock(AF_INET6, SOCK_STREAM, 0);
    show("bind [::]:P dual-stack", bind(c, (struct sockaddr *)&any6, sizeof any6));
    close(c);
    c = sock(AF_INET6, SOCK_STREAM, 1);
    struct sockaddr_in6 lo6p = v6(p, "::1");
    show("bind [::1]:P v6only", bind(c, (struct sockaddr *)&lo6p, sizeof lo6p));
    close(c);
    int zero = 0;
    show("IPV6_V6ONLY after bind", setsockopt(b, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero));

    int k4 = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in lo4p = v4(p, INADDR_LOOPBACK);
    show("connect 127.0.0.1:P", connect(k4, (struct sockaddr *)&lo4p, sizeof lo4p));
    take("  accept on the AF_INET listener", a);
    take("  accept on the v6only listener", b);
    int k6 = socket(AF_INET6, SOCK_STREAM, 0);
    show("connect [::1]:P", connect(k6, (struct sockaddr *)&lo6p, sizeof lo6p));
    take("  accept on the AF_INET listener", a);
    take("  accept on the v6only listener", b);
    close(k4);
    close(k6);
    close(a);
    close(b);

    /* A dual-stack listener takes IPv4 clients as ::ffff:127.0.0.1 and keeps AF_INET off it. */
    int d = sock(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 any60 = v6(0, "::");
    show("bind [::]:0 dual-stack", bind(d, (struct sockaddr *)&any60, sizeof any60));
    unsigned q = port_of(d);
    listen(d, 8);
    int e = sock(AF_INET, SOCK_STREAM, -1);
    struct sockaddr_in lo4q = v4(q, INADDR_LOOPBACK);
    show("bind 127.0.0.1:Q", bind(e, (struct sockaddr *)&lo4q, sizeof lo4q));
    close(e);
    k4 = socket(AF_INET, SOCK_STREAM, 0);
    show("connect 127.0.0.1:Q", connect(k4, (struct sockaddr *)&lo4q, sizeof lo4q));
    take("  accept on the dual-stack listener", d);
    k6 = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 lo6q = v6(q, "::1");
    show("connect [::1]:Q", connect(k6, (struct sockaddr *)&lo6q, sizeof lo6q));
    take("  accept on the dual-stack listener", d);
    close(k4);
    close(k6);
    close(d);

    /* An AF_INET listener is not reached through ::1, but is through ::ffff:127.0.0.1. */
    int g = sock(AF_INET, SOCK_STREAM, -1);
    struct sockaddr_in lo40 = v4(0, INADDR_LOOPBACK);
    bind(g, (struct sockaddr *)&lo40, sizeof lo40);
    unsigned r = port_of(g);
    listen(g, 8);
    k6 = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 lo6r = v6(r, "::1");
    show("connect [::1]:R (AF_INET listener)", connect(k6, (struct sockaddr *)&lo6r, sizeof lo6r));
    close(k6);
    k6 = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 mapped = v6(r, "::ffff:127.0.0.1");
    show("connect [::ffff:127.0.0.1]:R", connect(k6, (struct sockaddr *)&mapped, sizeof mapped));
    take("  accept on the AF_INET listener", g);
    close(k6);
    close(g);

    /* UDP: a datagram from an AF_INET socket to a dual-stack one comes from ::ffff:127.0.0.1. */
    int u6 = sock(AF_INET6, SOCK_DGRAM, 0);
    bind(u6, (struct sockaddr *)&any60, sizeof any60);
    unsigned s = port_of(u6);
    int u4 = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in lo4s = v4(s, INADDR_LOOPBACK);
    show("sendto 127.0.0.1:S (udp)", (int)sendto(u4, "hi", 2, 0, (struct sockaddr *)&lo4s, sizeof lo4s));
    struct sockaddr_in6 from;
    socklen_t n = sizeof from;
    char buf[8];
    int got = (int)recvfrom(u6, buf, sizeof buf, MSG_DONTWAIT, (struct sockaddr *)&from, &n);
    char text[INET6_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET6, &from.sin6_addr, text, sizeof text);
    printf("  recvfrom on the dual-stack socket: %d bytes from %s %s\n", got,
           from.sin6_family == AF_INET6 ? "AF_INET6" : "AF_INET", text);
    return 0;
}
