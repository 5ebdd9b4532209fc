/* POSIX message queues, printed so that a native run and a ferrite run can be compared:
 * names, O_CREAT/O_EXCL, attributes and their limits, priorities, O_NONBLOCK, EMSGSIZE, an
 * absolute CLOCK_REALTIME timeout, mq_getsetattr, mq_notify with SIGEV_SIGNAL (and EBUSY),
 * poll on the descriptor, a producer and a consumer process over a queue of two messages, and
 * mq_unlink while the queue is open. Queue names carry the pid so that runs do not meet. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *res(long r) {
    static char buf[64];
    if (r >= 0)
        return "ok";
    snprintf(buf, sizeof buf, "%s", strerror(errno));
    return buf;
}

static volatile sig_atomic_t notified, notified_value, notified_code;

static void on_notify(int sig, siginfo_t *si, void *uc) {
    (void)sig;
    (void)uc;
    notified++;
    notified_value = si->si_value.sival_int;
    notified_code = si->si_code;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    char name[64], other[64];
    snprintf(name, sizeof name, "/ferrite_mq_%d", (int)getpid());
    snprintf(other, sizeof other, "/ferrite_mq_%d_b", (int)getpid());

    printf("open without O_CREAT: %s\n", res(mq_open(name, O_RDWR)));
    printf("a name with two slashes: %s\n", res(mq_open("/a/b", O_RDWR | O_CREAT, 0600, NULL)));
    struct mq_attr bad = {.mq_maxmsg = 11, .mq_msgsize = 128};
    printf("maxmsg 11: %s\n", res(mq_open(name, O_RDWR | O_CREAT, 0600, &bad)));
    bad.mq_maxmsg = 4;
    bad.mq_msgsize = 8193;
    printf("msgsize 8193: %s\n", res(mq_open(name, O_RDWR | O_CREAT, 0600, &bad)));
    struct mq_attr attr = {.mq_maxmsg = 3, .mq_msgsize = 32};
    mqd_t q = mq_open(name, O_RDWR | O_CREAT | O_EXCL, 0600, &attr);
    printf("create: %s\n", res(q));
    printf("again with O_EXCL: %s\n", res(mq_open(name, O_RDWR | O_CREAT | O_EXCL, 0600, &attr)));
    struct mq_attr a;
    mq_getattr(q, &a);
    printf("attributes: flags %ld, maxmsg %ld, msgsize %ld, curmsgs %ld\n", a.mq_flags, a.mq_maxmsg, a.mq_msgsize,
           a.mq_curmsgs);
    mqd_t d = mq_open(other, O_RDWR | O_CREAT, 0600, NULL);
    mq_getattr(d, &a);
    printf("default attributes: maxmsg %ld, msgsize %ld\n", a.mq_maxmsg, a.mq_msgsize);
    mq_close(d);
    mq_unlink(other);

    struct pollfd p = {q, POLLIN | POLLOUT, 0};
    poll(&p, 1, 0);
    printf("poll empty: in %d, out %d\n", !!(p.revents & POLLIN), !!(p.revents & POLLOUT));
    printf("33 bytes: %s\n", res(mq_send(q, "0123456789012345678901234567890123", 33, 1)));
    printf("priority 32768: %s\n", res(mq_send(q, "x", 1, 32768)));
    mq_send(q, "low", 3, 1);
    mq_send(q, "high", 4, 7);
    mq_send(q, "low again", 9, 1);
    poll(&p, 1, 0);
    printf("poll full: in %d, out %d\n", !!(p.revents & POLLIN), !!(p.revents & POLLOUT));
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_nsec += 200 * 1000 * 1000;
    if (t.tv_nsec >= 1000000000) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000;
    }
    printf("send to a full queue, 200 ms: %s\n", res(mq_timedsend(q, "x", 1, 0, &t)));
    struct mq_attr nb = {.mq_flags = O_NONBLOCK}, old;
    mq_setattr(q, &nb, &old);
    printf("old flags %ld, curmsgs %ld\n", old.mq_flags, old.mq_curmsgs);
    printf("send, O_NONBLOCK: %s\n", res(mq_send(q, "x", 1, 0)));
    char buf[64];
    unsigned prio;
    printf("receive into 31 bytes: %s\n", res(mq_receive(q, buf, 31, &prio)));
    for (int i = 0; i < 3; i++) {
        ssize_t n = mq_receive(q, buf, sizeof buf, &prio);
        printf("received: %.*s (priority %u)\n", (int)n, buf, prio);
    }
    printf("receive, O_NONBLOCK: %s\n", res(mq_receive(q, buf, sizeof buf, &prio)));
    nb.mq_flags = 0;
    mq_setattr(q, &nb, NULL);
    clock_gettime(CLOCK_REALTIME, &t);
    printf("receive, a timeout passed already: %s\n", res(mq_timedreceive(q, buf, sizeof buf, &prio, &t)));
    t.tv_nsec = 1000000000;
    printf("receive, a bad timeout: %s\n", res(mq_timedreceive(q, buf, sizeof buf, &prio, &t)));

    /* Notification by signal, once, when a message arrives in the empty queue. */
    struct sigaction sa = {0};
    sa.sa_sigaction = on_notify;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGUSR1, &sa, NULL);
    struct sigevent ev = {0};
    ev.sigev_notify = SIGEV_SIGNAL;
    ev.sigev_signo = SIGUSR1;
    ev.sigev_value.sival_int = 42;
    printf("mq_notify: %s\n", res(mq_notify(q, &ev)));
    printf("mq_notify again: %s\n", res(mq_notify(q, &ev)));
    mq_send(q, "ping", 4, 0);
    mq_send(q, "pong", 4, 0);
    printf("notified %d time(s), value %d, SI_MESGQ %d\n", (int)notified, (int)notified_value,
           notified_code == SI_MESGQ);
    mq_receive(q, buf, sizeof buf, &prio);
    mq_receive(q, buf, sizeof buf, &prio);
    mq_send(q, "ping", 4, 0);
    printf("after the one notification: %d time(s)\n", (int)notified);
    mq_receive(q, buf, sizeof buf, &prio);

    /* A producer and a consumer process. */
    fflush(stdout);
    pid_t c = fork();
    if (c == 0) {
        long sum = 0;
        int n = 0;
        for (;;) {
            ssize_t r = mq_receive(q, buf, sizeof buf, &prio);
            if (r < 0)
                break;
            buf[r] = 0;
            /* The last message, sent at the same priority: after every number. */
            if (strcmp(buf, "end") == 0)
                break;
            sum += atol(buf);
            n++;
        }
        printf("consumer: %d messages, sum %ld\n", n, sum);
        fflush(stdout);
        _exit(0);
    }
    for (int i = 1; i <= 100; i++) {
        char m[16];
        int len = snprintf(m, sizeof m, "%d", i);
        mq_send(q, m, len, 0);
    }
    mq_send(q, "end", 3, 0);
    waitpid(c, NULL, 0);

    printf("unlink: %s\n", res(mq_unlink(name)));
    printf("unlink again: %s\n", res(mq_unlink(name)));
    printf("still usable: send %s", res(mq_send(q, "after", 5, 0)));
    printf(", receive %zd\n", mq_receive(q, buf, sizeof buf, &prio));
    printf("open after unlink: %s\n", res(mq_open(name, O_RDWR)));
    mq_close(q);
    return 0;
}
