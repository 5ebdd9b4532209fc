/* sock_probe: what a program that only probes for services sees of sockets and extended
 * attributes. Every line it prints is the same natively (on a host where nothing listens on
 * loopback port 1 and the nscd socket path does not exist) and under ferrite. Usage: sock_probe FILE */
#include <errno.h>
#include <signal.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

static void show(const char *what, int r)
{
    printf("%s: %s\n", what, r < 0 ? strerror(errno) : "ok");
}

int main(int argc, char **argv)
{
    const char *file = argc > 1 ? argv[1] : "/";

    int u = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    show("socket(AF_UNIX)", u);
    struct stat st;
    if (fstat(u, &st) == 0)
        printf("S_ISSOCK: %d\n", S_ISSOCK(st.st_mode));
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    strcpy(sun.sun_path, "/nonexistent-ferrite-probe/socket");
    show("connect(unix path)", connect(u, (struct sockaddr *)&sun, sizeof sun));
    char buf[8];
    show("read(unconnected)", (int)read(u, buf, sizeof buf));
    close(u);

    int t = socket(AF_INET, SOCK_STREAM, 0);
    show("socket(AF_INET)", t);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(1), .sin_addr.s_addr = htonl(0x7f000001)};
    show("connect(127.0.0.1:1)", connect(t, (struct sockaddr *)&sin, sizeof sin));
    signal(SIGPIPE, SIG_IGN);
    show("write(unconnected tcp)", (int)write(t, "x", 1));
    show("read(unconnected tcp)", (int)read(t, buf, sizeof buf));
    close(t);

    int t6 = socket(AF_INET6, SOCK_STREAM, 0);
    show("socket(AF_INET6)", t6);
    struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6, .sin6_port = htons(1), .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    show("connect([::1]:1)", connect(t6, (struct sockaddr *)&sin6, sizeof sin6));
    close(t6);

    show("socket(bad type)", socket(AF_INET, 0x7, 0));
    show("connect(not a socket)", connect(1, (struct sockaddr *)&sin, sizeof sin));

    char v[64];
    show("lgetxattr(security.selinux)", (int)lgetxattr(file, "security.selinux", v, sizeof v));
    show("getxattr(missing file)", (int)getxattr("/nonexistent-ferrite-probe", "user.x", v, sizeof v));
    printf("listxattr: %d\n", (int)listxattr(file, v, sizeof v));
    return 0;
}
