#define _GNU_SOURCE
/* Two processes sharing System V IPC objects or a POSIX message queue, for snapshots of runs
 * that hold them (explorations, reverse execution): the output is the same under every
 * schedule, so a run restored from a snapshot must give what a run from the start gives.
 *
 *   sysv_snap shm N   parent and child each add 1 N times to a counter in a segment both
 *                     attach, under a semaphore; the child also adds 1 to a second segment it
 *                     attaches and detaches each time (nobody holds it between), which the
 *                     parent reads at the end.
 *   sysv_snap mq N    the parent sends 1..N over a queue of 4 messages at three priorities,
 *                     the child receives and sums them.
 *   sysv_snap munmap  what munmap, mremap, MAP_FIXED and exec do to attachments (shm_nattch,
 *                     a removed segment freed at its last detach, shmdt of a non-start).
 *   sysv_snap fifo    three processes wait in turn on one semaphore; the parent posts it once
 *                     at a time: Linux serves the waiters in the order they came.
 *   sysv_snap proc    its objects' lines of /proc/sysvipc/{shm,sem,msg} and of `ipcs`
 *                     (util-linux), without what differs between machines (ids, pids, owners,
 *                     times), and `ipcs -l`'s limits. */
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

static void die(const char *what) {
    printf("%s: %s\n", what, strerror(errno));
    exit(1);
}

static void sem_change(int id, int op) {
    struct sembuf b = {0, (short)op, 0};
    if (semop(id, &b, 1) != 0)
        die("semop");
}

static unsigned long nattch(int id) {
    struct shmid_ds ds;
    if (shmctl(id, IPC_STAT, &ds) != 0)
        return (unsigned long)-1;
    return ds.shm_nattch;
}

static int shm(long n) {
    int sem = semget(IPC_PRIVATE, 1, 0600);
    if (sem < 0 || semctl(sem, 0, SETVAL, 1) != 0)
        die("semget");
    int a = shmget(IPC_PRIVATE, 4096, 0600), b = shmget(IPC_PRIVATE, 8192, 0600);
    if (a < 0 || b < 0)
        die("shmget");
    volatile long *counter = shmat(a, NULL, 0);
    if (counter == (void *)-1)
        die("shmat");
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    for (long i = 0; i < n; i++) {
        sem_change(sem, -1);
        ++*counter;
        if (pid == 0) {
            volatile long *tally = shmat(b, NULL, 0);
            if (tally == (void *)-1)
                die("shmat");
            tally[1000]++;
            if (shmdt((void *)tally) != 0)
                die("shmdt");
        }
        sem_change(sem, 1);
    }
    if (pid == 0)
        _exit(0);
    int st;
    waitpid(pid, &st, 0);
    long *tally = shmat(b, NULL, SHM_RDONLY);
    printf("counter: %ld\ntally: %ld\nnattch: %lu %lu\n", *counter, tally[1000], nattch(a), nattch(b));
    shmctl(a, IPC_RMID, NULL);
    shmctl(b, IPC_RMID, NULL);
    semctl(sem, 0, IPC_RMID);
    return 0;
}

static int mq(long n) {
    char name[64];
    snprintf(name, sizeof name, "/sysv_snap.%d", (int)getpid());
    struct mq_attr attr = {.mq_maxmsg = 4, .mq_msgsize = 64};
    mqd_t q = mq_open(name, O_RDWR | O_CREAT | O_EXCL, 0600, &attr);
    if (q == (mqd_t)-1)
        die("mq_open");
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        long sum = 0, first = 0;
        for (long i = 0; i < n; i++) {
            char buf[64];
            unsigned prio;
            if (mq_receive(q, buf, sizeof buf, &prio) != sizeof(long))
                die("mq_receive");
            long v;
            memcpy(&v, buf, sizeof v);
            if (i == 0)
                first = v;
            sum += v;
        }
        printf("child: %ld messages, sum %ld\n", n, sum);
        (void)first;
        fflush(stdout);
        _exit(0);
    }
    for (long i = 1; i <= n; i++)
        if (mq_send(q, (const char *)&i, sizeof i, (unsigned)(i % 3)) != 0)
            die("mq_send");
    int st;
    waitpid(pid, &st, 0);
    struct mq_attr now;
    mq_getattr(q, &now);
    printf("parent: sent %ld, %ld left\n", n, now.mq_curmsgs);
    mq_close(q);
    mq_unlink(name);
    return 0;
}

static const char *res(long r) {
    static char buf[64];
    if (r >= 0)
        return "ok";
    snprintf(buf, sizeof buf, "%s", strerror(errno));
    return buf;
}

static int munmap_probe(const char *self) {
    int id = shmget(IPC_PRIVATE, 3 * 4096, 0600);
    char *p = shmat(id, NULL, 0);
    char *q = shmat(id, NULL, 0);
    printf("two attachments: nattch %lu\n", nattch(id));
    printf("shmdt(start + 4096): %s\n", res(shmdt(p + 4096)));
    printf("shmdt(start + 1): %s\n", res(shmdt(p + 1)));
    /* A hole in the middle splits the attachment in two, each counted (Linux counts vmas). */
    long r = munmap(p + 4096, 4096);
    printf("munmap of the middle page: %s, nattch %lu\n", res(r), nattch(id));
    r = munmap(p, 3 * 4096);
    printf("munmap of the rest: %s, nattch %lu\n", res(r), nattch(id));
    printf("shmdt of the unmapped one: %s\n", res(shmdt(p)));
    /* Moved by mremap: still attached, detached at its new start. */
    char *m = mremap(q, 3 * 4096, 3 * 4096, MREMAP_MAYMOVE | MREMAP_FIXED, p);
    printf("mremap to another address: %s, nattch %lu\n", res(m == MAP_FAILED ? -1 : 0), nattch(id));
    printf("shmdt(old start): %s\n", res(shmdt(q)));
    r = shmdt(m);
    printf("shmdt(new start): %s, nattch %lu\n", res(r), nattch(id));
    /* MAP_FIXED over an attachment replaces it. */
    char *a = shmat(id, NULL, 0);
    void *f = mmap(a, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    printf("MAP_FIXED over it: %s, nattch %lu\n", res(f == MAP_FAILED ? -1 : 0), nattch(id));
    /* Shrunk by mremap: the rest stays attached. */
    a = shmat(id, NULL, 0);
    m = mremap(a, 3 * 4096, 4096, 0);
    printf("mremap shrinking it: %s, nattch %lu\n", res(m == MAP_FAILED ? -1 : 0), nattch(id));
    r = shmdt(a);
    printf("shmdt of the shrunk one: %s, nattch %lu\n", res(r), nattch(id));
    /* A removed segment goes with its last detach, by munmap. */
    char *s = shmat(id, NULL, 0);
    s[5] = 1;
    shmctl(id, IPC_RMID, NULL);
    printf("removed while attached: nattch %lu\n", nattch(id));
    munmap(s, 3 * 4096);
    printf("after the last munmap: IPC_STAT %s\n", res(nattch(id) == (unsigned long)-1 ? -1 : 0));
    /* exec detaches what the process had attached. */
    int keep = shmget(IPC_PRIVATE, 4096, 0600);
    shmat(keep, NULL, 0);
    printf("before exec: nattch %lu\n", nattch(keep));
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        char arg[32];
        snprintf(arg, sizeof arg, "%d", keep);
        execl(self, self, "nattch", arg, (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    printf("after the child's exec and exit: nattch %lu\n", nattch(keep));
    shmctl(keep, IPC_RMID, NULL);
    return 0;
}

/* The fields of the line of /proc/sysvipc/`kind` whose second column is `id`, past the id;
 * `skip` more fields are dropped after the first `keep`. */
static void proc_line(const char *kind, int id, int keep) {
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/sysvipc/%s", kind);
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("%s: %s\n", path, strerror(errno));
        return;
    }
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        int key, lid, n;
        if (sscanf(line, "%d %d%n", &key, &lid, &n) != 2 || lid != id)
            continue;
        found = 1;
        printf("%s: key %d", kind, key);
        char *p = line + n;
        for (int i = 0; i < keep; i++) {
            char field[64];
            int m;
            if (sscanf(p, "%63s%n", field, &m) != 1)
                break;
            printf(" %s", field);
            p += m;
        }
        printf("\n");
    }
    if (!found)
        printf("%s: id not listed\n", kind);
    fclose(f);
}

/* The line of `ipcs -x` output for `id`: its fields but the owner (third). */
static void ipcs_line(const char *opt, int id) {
    char cmd[64], line[512];
    snprintf(cmd, sizeof cmd, "ipcs %s", opt);
    FILE *f = popen(cmd, "r");
    if (!f) {
        printf("popen: %s\n", strerror(errno));
        return;
    }
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        char key[32], owner[64], rest[256] = "";
        int lid;
        if (sscanf(line, "%31s %d %63s %255[^\n]", key, &lid, owner, rest) < 3 || lid != id)
            continue;
        found = 1;
        printf("ipcs %s: %s %s\n", opt, key, rest);
    }
    if (!found)
        printf("ipcs %s: id not listed\n", opt);
    pclose(f);
}

static int proc_probe(void) {
    int shm = shmget(IPC_PRIVATE, 10000, 0640);
    int sem = semget(IPC_PRIVATE, 3, 0600);
    int msg = msgget(IPC_PRIVATE, 0620);
    if (shm < 0 || sem < 0 || msg < 0)
        die("get");
    char *p = shmat(shm, NULL, 0);
    struct {
        long mtype;
        char text[100];
    } m = {1, "hello"};
    msgsnd(msg, &m, 100, 0);
    msgsnd(msg, &m, 20, 0);
    /* perms, size, (cpid lpid skipped by reading only the first two), then nattch. */
    proc_line("shm", shm, 2);
    proc_line("sem", sem, 2);
    proc_line("msg", msg, 3);
    shmctl(shm, IPC_RMID, NULL);
    proc_line("shm", shm, 2);
    fflush(stdout);
    ipcs_line("-m", shm);
    ipcs_line("-s", sem);
    ipcs_line("-q", msg);
    shmdt(p);
    proc_line("shm", shm, 1);
    semctl(sem, 0, IPC_RMID);
    msgctl(msg, IPC_RMID, NULL);
    fflush(stdout);
    FILE *f = popen("ipcs -l", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        fputs(line, stdout);
    if (f)
        pclose(f);
    return 0;
}

static int fifo(void) {
    int sem = semget(IPC_PRIVATE, 2, 0600);
    int log = shmget(IPC_PRIVATE, 4096, 0600);
    if (sem < 0 || log < 0)
        die("get");
    volatile int *served = shmat(log, NULL, 0);
    for (int k = 0; k < 3; k++) {
        pid_t pid = fork();
        if (pid == 0) {
            struct sembuf take = {0, -1, 0}, ack = {1, 1, 0};
            if (semop(sem, &take, 1) != 0)
                die("semop");
            served[1 + served[0]++] = k;
            semop(sem, &ack, 1);
            _exit(0);
        }
        /* The next one comes only once this one waits. */
        for (int i = 0; i < 100000 && semctl(sem, 0, GETNCNT) != k + 1; i++)
            usleep(1000);
    }
    for (int k = 0; k < 3; k++) {
        struct sembuf post = {0, 1, 0}, ack = {1, -1, 0};
        semop(sem, &post, 1);
        semop(sem, &ack, 1);
    }
    while (wait(NULL) > 0)
        ;
    printf("served in order: %d %d %d\n", served[1], served[2], served[3]);
    shmctl(log, IPC_RMID, NULL);
    semctl(sem, 0, IPC_RMID);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "shm") == 0)
        return shm(atol(argv[2]));
    if (argc >= 3 && strcmp(argv[1], "mq") == 0)
        return mq(atol(argv[2]));
    if (argc >= 2 && strcmp(argv[1], "fifo") == 0)
        return fifo();
    if (argc >= 2 && strcmp(argv[1], "proc") == 0)
        return proc_probe();
    if (argc >= 2 && strcmp(argv[1], "munmap") == 0)
        return munmap_probe(argv[0]);
    if (argc >= 3 && strcmp(argv[1], "nattch") == 0) {
        printf("after exec: nattch %lu\n", nattch(atoi(argv[2])));
        return 0;
    }
    fprintf(stderr, "usage: sysv_snap shm N | mq N | munmap\n");
    return 2;
}
