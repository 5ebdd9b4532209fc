/* Descriptors and credentials passed over AF_UNIX sockets (SCM_RIGHTS, SCM_CREDENTIALS), as
 * Python's multiprocessing forkserver and servers that hand connections to workers use them.
 * Every answer is printed so the output can be compared with a native run: a passed descriptor
 * shares its open file description (offset, status flags) but not FD_CLOEXEC; MSG_CMSG_CLOEXEC;
 * a control buffer too small (MSG_CTRUNC, the rest closed) or missing; how a stream read glues
 * sends but stops after the one that carried descriptors; MSG_PEEK; datagram and seqpacket
 * messages; a pipe end passed from a child to its parent; a descriptor closed in flight; the
 * errors of sendmsg's control data (an inet socket ignores SOL_SOCKET control messages). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int send_fds(int sock, const char *data, size_t len, const int *fds, int n) {
    char ctl[CMSG_SPACE(sizeof(int) * 8)];
    memset(ctl, 0, sizeof ctl);
    struct iovec iov = {(void *)data, len};
    struct msghdr msg = {0};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (n > 0) {
        msg.msg_control = ctl;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * n);
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * n);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
    }
    return (int)sendmsg(sock, &msg, 0);
}

/* Receives up to `len` bytes and the descriptors that came with them (at most `room` fit the
 * control buffer; room < 0: no control buffer). Returns the byte count, fills fds/nfds and the
 * message flags. */
static int recv_fds(int sock, char *buf, size_t len, int *fds, int *nfds, int room, int flags, int *mflags) {
    char ctl[CMSG_SPACE(sizeof(int) * 8)];
    struct iovec iov = {buf, len};
    struct msghdr msg = {0};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (room >= 0) {
        msg.msg_control = ctl;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * room);
        if (room == 0)
            msg.msg_controllen = sizeof(struct cmsghdr);
    }
    int r = (int)recvmsg(sock, &msg, flags);
    *nfds = 0;
    if (r < 0)
        return r;
    *mflags = msg.msg_flags;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            memcpy(fds + *nfds, CMSG_DATA(c), sizeof(int) * k);
            *nfds += k;
        }
    }
    return r;
}

static const char *ctrunc(int f) { return f & MSG_CTRUNC ? " MSG_CTRUNC" : ""; }

/* The lowest descriptor free now: where the next open lands. */
static int lowest_free(void) {
    int fd = dup(0);
    close(fd);
    return fd;
}

int main(void) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) {
        perror("socketpair");
        return 1;
    }
    int f = open("scm_file", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (write(f, "0123456789", 10) != 10 || lseek(f, 2, SEEK_SET) != 2)
        return 1;

    /* A passed descriptor: one open file description, its own FD_CLOEXEC. */
    int n = send_fds(sv[0], "x", 1, &f, 1);
    char buf[64];
    int fds[8], nf, mf = 0;
    int r = recv_fds(sv[1], buf, sizeof buf, fds, &nf, 4, 0, &mf);
    printf("sent 1 fd: sendmsg %d, recvmsg %d byte(s) \"%.*s\", %d fd(s)%s\n", n, r, r, buf, nf, ctrunc(mf));
    int g = fds[0];
    printf("a new number: %s; FD_CLOEXEC of the copy: %d (the original: %d)\n", g != f ? "yes" : "no",
           fcntl(g, F_GETFD), fcntl(f, F_GETFD));
    r = (int)read(g, buf, 3);
    printf("read 3 through the copy: \"%.*s\"; the original's offset is now %ld\n", r, buf, (long)lseek(f, 0, SEEK_CUR));
    fcntl(f, F_SETFL, O_APPEND);
    printf("O_APPEND set on the original shows on the copy: %s\n", fcntl(g, F_GETFL) & O_APPEND ? "yes" : "no");
    close(g);

    /* MSG_CMSG_CLOEXEC. */
    send_fds(sv[0], "y", 1, &f, 1);
    recv_fds(sv[1], buf, sizeof buf, fds, &nf, 4, MSG_CMSG_CLOEXEC, &mf);
    printf("with MSG_CMSG_CLOEXEC: FD_CLOEXEC %d\n", fcntl(fds[0], F_GETFD));
    close(fds[0]);

    /* Three descriptors, room for one: MSG_CTRUNC, the other two closed. */
    int three[3] = {f, f, f};
    int before = lowest_free();
    send_fds(sv[0], "z", 1, three, 3);
    r = recv_fds(sv[1], buf, sizeof buf, fds, &nf, 1, 0, &mf);
    printf("3 fds, CMSG_SPACE of 1 (room for 2): %d byte(s), %d fd(s)%s, at the lowest free: %s, then the next: %s\n", r,
           nf, ctrunc(mf), fds[0] == before ? "yes" : "no", nf == 2 && fds[1] == before + 1 ? "yes" : "no");
    for (int i = 0; i < nf; i++)
        close(fds[i]);
    /* Room for the header only, and no control buffer at all. */
    send_fds(sv[0], "h", 1, &f, 1);
    r = recv_fds(sv[1], buf, sizeof buf, fds, &nf, 0, 0, &mf);
    printf("room for the header only: %d byte(s), %d fd(s)%s\n", r, nf, ctrunc(mf));
    send_fds(sv[0], "w", 1, &f, 1);
    r = recv_fds(sv[1], buf, sizeof buf, fds, &nf, -1, 0, &mf);
    printf("no control buffer: %d byte(s), %d fd(s)%s, nothing installed: %s\n", r, nf, ctrunc(mf),
           lowest_free() == before ? "yes" : "no");
    send_fds(sv[0], "r", 1, &f, 1);
    r = (int)read(sv[1], buf, sizeof buf);
    printf("read(2) of a send with a fd: %d byte(s), nothing installed: %s\n", r, lowest_free() == before ? "yes" : "no");

    /* A stream read glues sends, but stops after the one that carried descriptors. */
    send_fds(sv[0], "ab", 2, NULL, 0);
    send_fds(sv[0], "cd", 2, &f, 1);
    send_fds(sv[0], "ef", 2, NULL, 0);
    r = recv_fds(sv[1], buf, sizeof buf, fds, &nf, 4, 0, &mf);
    printf("ab, cd+fd, ef: first read \"%.*s\" with %d fd(s)", r, buf, nf);
    if (nf)
        close(fds[0]);
    r = recv_fds(sv[1], buf, sizeof buf, fds, &nf, 4, 0, &mf);
    printf(", then \"%.*s\" with %d fd(s)\n", r, buf, nf);
    /* A read shorter than the send takes its descriptors with the first bytes. */
    send_fds(sv[0], "long", 4, &f, 1);
    r = recv_fds(sv[1], buf, 2, fds, &nf, 4, 0, &mf);
    printf("2 of 4 bytes: \"%.*s\" with %d fd(s)", r, buf, nf);
    if (nf)
        close(fds[0]);
    r = recv_fds(sv[1], buf, sizeof buf, fds, &nf, 4, 0, &mf);
    printf(", the rest \"%.*s\" with %d fd(s)\n", r, buf, nf);

    /* MSG_PEEK installs a descriptor too; the read after it another. */
    send_fds(sv[0], "p", 1, &f, 1);
    r = recv_fds(sv[1], buf, sizeof buf, fds, &nf, 4, MSG_PEEK, &mf);
    int peeked = nf ? fds[0] : -1;
    printf("MSG_PEEK: %d byte(s), %d fd(s)", r, nf);
    r = recv_fds(sv[1], buf, sizeof buf, fds, &nf, 4, 0, &mf);
    printf("; then a read: %d byte(s), %d fd(s), a second number: %s\n", r, nf, nf && fds[0] != peeked ? "yes" : "no");
    close(peeked);
    if (nf)
        close(fds[0]);

    /* A stream send of no bytes sends no descriptor either. */
    n = send_fds(sv[0], "", 0, &f, 1);
    r = (int)recv(sv[1], buf, sizeof buf, MSG_DONTWAIT);
    printf("empty stream send with a fd: sendmsg %d, then recv %d (%s)\n", n, r, r < 0 ? strerror(errno) : "data");

    /* Datagrams and seqpacket: each message with its own descriptors. */
    int types[2] = {SOCK_DGRAM, SOCK_SEQPACKET};
    for (int t = 0; t < 2; t++) {
        int dv[2];
        socketpair(AF_UNIX, types[t], 0, dv);
        send_fds(dv[0], "one", 3, &f, 1);
        send_fds(dv[0], "two", 3, three, 2);
        send_fds(dv[0], "", 0, &f, 1);
        int a = recv_fds(dv[1], buf, sizeof buf, fds, &nf, 4, 0, &mf);
        printf("%s: \"%.*s\" %d fd(s)", t ? "seqpacket" : "datagram", a, buf, nf);
        for (int i = 0; i < nf; i++)
            close(fds[i]);
        a = recv_fds(dv[1], buf, 2, fds, &nf, 4, 0, &mf);
        printf(", \"%.*s\"%s %d fd(s)", a, buf, mf & MSG_TRUNC ? " MSG_TRUNC" : "", nf);
        for (int i = 0; i < nf; i++)
            close(fds[i]);
        a = recv_fds(dv[1], buf, sizeof buf, fds, &nf, 4, 0, &mf);
        printf(", empty: %d byte(s) %d fd(s)\n", a, nf);
        for (int i = 0; i < nf; i++)
            close(fds[i]);
        close(dv[0]);
        close(dv[1]);
    }

    /* Between processes: a child passes its pipe's write end to its parent and closes its own;
     * the parent writes through it and the child reads what it wrote, then end of file once the
     * parent closes it. */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int p[2];
        if (pipe(p) < 0)
            _exit(1);
        send_fds(sv[1], "P", 1, &p[1], 1);
        close(p[1]);
        char b[32];
        int k = (int)read(p[0], b, sizeof b);
        printf("child read through the pipe: \"%.*s\"", k, b);
        k = (int)read(p[0], b, sizeof b);
        printf(", then %d (end of file)\n", k);
        fflush(stdout);
        _exit(0);
    }
    r = recv_fds(sv[0], buf, sizeof buf, fds, &nf, 4, 0, &mf);
    if (nf == 1) {
        if (write(fds[0], "from the parent", 15) != 15)
            return 1;
        close(fds[0]);
    }
    int st;
    waitpid(pid, &st, 0);
    printf("child exited %d\n", WEXITSTATUS(st));

    /* A descriptor closed in flight: the pipe's only write end, sent and closed, then the
     * socket that would receive it closes: the pipe reads end of file. */
    int p[2], cv[2];
    pipe(p);
    socketpair(AF_UNIX, SOCK_STREAM, 0, cv);
    send_fds(cv[0], "q", 1, &p[1], 1);
    close(p[1]);
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    r = (int)read(p[0], buf, 1);
    printf("write end in flight: read %d (%s)", r, r < 0 ? strerror(errno) : "end of file");
    close(cv[1]);
    r = (int)read(p[0], buf, 1);
    printf("; after the receiver closed: read %d (%s)\n", r, r < 0 ? strerror(errno) : "end of file");
    close(cv[0]);
    close(p[0]);

    /* Credentials: with SO_PASSCRED the receiver learns the sender's pid, uid and gid. */
    int on = 1;
    setsockopt(sv[1], SOL_SOCKET, SO_PASSCRED, &on, sizeof on);
    send(sv[0], "c", 1, 0);
    {
        char ctl[CMSG_SPACE(sizeof(struct ucred))];
        struct iovec iov = {buf, sizeof buf};
        struct msghdr msg = {0};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = ctl;
        msg.msg_controllen = sizeof ctl;
        r = (int)recvmsg(sv[1], &msg, 0);
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        struct ucred u = {0};
        if (c && c->cmsg_type == SCM_CREDENTIALS)
            memcpy(&u, CMSG_DATA(c), sizeof u);
        printf("SO_PASSCRED: %d byte(s), SCM_CREDENTIALS %s, pid is ours: %s, uid is ours: %s, controllen %zu\n", r,
               c && c->cmsg_type == SCM_CREDENTIALS ? "yes" : "no", u.pid == getpid() ? "yes" : "no",
               u.uid == getuid() ? "yes" : "no", (size_t)msg.msg_controllen);
    }
    on = 0;
    setsockopt(sv[1], SOL_SOCKET, SO_PASSCRED, &on, sizeof on);

    /* sendmsg's errors. */
    {
        char ctl[CMSG_SPACE(sizeof(struct ucred))];
        memset(ctl, 0, sizeof ctl);
        struct iovec iov = {"e", 1};
        struct msghdr msg = {0};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = ctl;
        msg.msg_controllen = CMSG_SPACE(sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        int bad = 999;
        memcpy(CMSG_DATA(c), &bad, sizeof bad);
        printf("SCM_RIGHTS of a closed fd: %s\n", sendmsg(sv[0], &msg, 0) < 0 ? strerror(errno) : "sent");
        c->cmsg_len = CMSG_SPACE(sizeof(int)) + 8;
        printf("cmsg_len past the buffer: %s\n", sendmsg(sv[0], &msg, 0) < 0 ? strerror(errno) : "sent");
        c->cmsg_len = CMSG_LEN(sizeof(int));
        c->cmsg_type = 77;
        printf("an unknown SOL_SOCKET type: %s\n", sendmsg(sv[0], &msg, 0) < 0 ? strerror(errno) : "sent");
        c->cmsg_type = SCM_RIGHTS;
        memcpy(CMSG_DATA(c), &f, sizeof f);
        int udp = socket(AF_INET, SOCK_DGRAM, 0);
        struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(9), .sin_addr.s_addr = htonl(0x7f000001)};
        msg.msg_name = &sin;
        msg.msg_namelen = sizeof sin;
        printf("SCM_RIGHTS over UDP: %s\n", sendmsg(udp, &msg, 0) < 0 ? strerror(errno) : "sent");
        close(udp);
        msg.msg_name = NULL;
        msg.msg_namelen = 0;
        c->cmsg_level = IPPROTO_TCP;
        printf("another level is ignored: %s\n", sendmsg(sv[0], &msg, 0) < 0 ? strerror(errno) : "sent");
        recv(sv[1], buf, sizeof buf, 0);
        /* SCM_CREDENTIALS: our own pass, another pid is EPERM, a wrong length EINVAL. */
        msg.msg_controllen = CMSG_SPACE(sizeof(struct ucred));
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_CREDENTIALS;
        c->cmsg_len = CMSG_LEN(sizeof(struct ucred));
        struct ucred u = {getpid(), getuid(), getgid()};
        memcpy(CMSG_DATA(c), &u, sizeof u);
        printf("SCM_CREDENTIALS of our own: %s", sendmsg(sv[0], &msg, 0) < 0 ? strerror(errno) : "sent");
        recv(sv[1], buf, sizeof buf, 0);
        c->cmsg_len = CMSG_LEN(sizeof(int));
        printf("; a short one: %s\n", sendmsg(sv[0], &msg, 0) < 0 ? strerror(errno) : "sent");
    }
    close(f);
    unlink("scm_file");
    printf("done\n");
    return 0;
}
