#define _GNU_SOURCE
/* System V IPC between processes, printed so that a native run and a ferrite run can be
 * compared line by line (no ids, pids or times are printed, only what they mean): shared
 * memory segments (keys, IPC_EXCL, IPC_STAT's size, nattch and pids, SHM_RDONLY, IPC_RMID with
 * attachments, fork and exit), semaphore sets (SETALL/GETALL, IPC_NOWAIT, semtimedop's timeout,
 * ERANGE/EFBIG/E2BIG, SEM_UNDO undone at exit, wait-for-zero and GETZCNT/GETNCNT, EINTR under
 * SA_RESTART, IPC_RMID waking a waiter with EIDRM), message queues (types 0, >0, <0,
 * MSG_EXCEPT, MSG_NOERROR, E2BIG, ENOMSG, a full queue) and two processes counting in a shared
 * segment under a semaphore, and a producer and a consumer over a small queue. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

union semun {
    int val;
    struct semid_ds *buf;
    unsigned short *array;
};

static const char *res(long r) {
    static char buf[64];
    if (r >= 0)
        return "ok";
    snprintf(buf, sizeof buf, "%s", strerror(errno));
    return buf;
}

static int sem_change(int id, int num, int op, int flags) {
    struct sembuf b = {(unsigned short)num, (short)op, (short)flags};
    return semop(id, &b, 1);
}

/* Waits (polling, as nothing else tells) until `count` threads wait on semaphore `num`. */
static void until_waiting(int id, int num, int cmd, int count) {
    for (int i = 0; i < 100000 && semctl(id, num, cmd) != count; i++)
        usleep(1000);
}

static void on_segv(int sig) {
    (void)sig;
    _exit(7);
}

static void shared_memory(void) {
    printf("-- shared memory\n");
    /* The program's own file: its key does not depend on the working directory (a run's
     * trace must not), and two builds of the probe have two keys. */
    key_t key = ftok("/proc/self/exe", 'a');
    int id = shmget(key, 10000, IPC_CREAT | IPC_EXCL | 0600);
    printf("shmget(key, IPC_CREAT|IPC_EXCL): %s\n", res(id));
    printf("again with IPC_EXCL: %s\n", res(shmget(key, 10000, IPC_CREAT | IPC_EXCL | 0600)));
    printf("again without: %s\n", shmget(key, 5000, 0600) == id ? "same id" : "another id");
    printf("again, larger: %s\n", res(shmget(key, 20000, 0600)));
    printf("another key without IPC_CREAT: %s\n", res(shmget(key + 1, 100, 0600)));
    printf("size 0: %s\n", res(shmget(IPC_PRIVATE, 0, 0600)));
    struct shmid_ds ds;
    shmctl(id, IPC_STAT, &ds);
    printf("IPC_STAT: size %zu, nattch %lu, mode %o, cpid mine %d, lpid %d\n", ds.shm_segsz,
           (unsigned long)ds.shm_nattch, ds.shm_perm.mode & 0777, ds.shm_cpid == getpid(), ds.shm_lpid);
    char *p = shmat(id, NULL, 0);
    printf("shmat: %s\n", p == (void *)-1 ? strerror(errno) : "ok");
    printf("zeroed: %d\n", p[0] == 0 && p[9999] == 0);
    strcpy(p, "written before the fork");
    shmctl(id, IPC_STAT, &ds);
    printf("after shmat: nattch %lu, lpid mine %d\n", (unsigned long)ds.shm_nattch, ds.shm_lpid == getpid());
    char *q = shmat(id, NULL, SHM_RDONLY);
    printf("second attach read-only sees: \"%s\"\n", q);
    shmctl(id, IPC_STAT, &ds);
    printf("two attachments: nattch %lu\n", (unsigned long)ds.shm_nattch);
    printf("shmdt(read-only): %s\n", res(shmdt(q)));
    printf("shmdt(not attached): %s\n", res(shmdt(p + 4096)));
    printf("shmat at an unaligned address: %s\n", shmat(id, p + 1, 0) == (void *)-1 ? strerror(errno) : "ok");
    fflush(stdout);
    pid_t c = fork();
    if (c == 0) {
        struct shmid_ds cd;
        shmctl(id, IPC_STAT, &cd);
        printf("child sees \"%s\", nattch %lu\n", p, (unsigned long)cd.shm_nattch);
        strcpy(p, "written by the child");
        fflush(stdout);
        _exit(0);
    }
    int st;
    waitpid(c, &st, 0);
    shmctl(id, IPC_STAT, &ds);
    printf("parent sees \"%s\", nattch %lu after the child's exit\n", p, (unsigned long)ds.shm_nattch);
    /* A read-only attachment written to: SIGSEGV. */
    fflush(stdout);
    c = fork();
    if (c == 0) {
        /* Handled, so that the fault is no finding under ferrite. */
        signal(SIGSEGV, on_segv);
        volatile char *r = shmat(id, NULL, SHM_RDONLY);
        r[0] = 'x';
        _exit(0);
    }
    waitpid(c, &st, 0);
    printf("a store to a read-only attachment: %s\n", WEXITSTATUS(st) == 7 ? "SIGSEGV" : "no fault");
    printf("IPC_RMID while attached: %s\n", res(shmctl(id, IPC_RMID, NULL)));
    shmctl(id, IPC_STAT, &ds);
    printf("after IPC_RMID: key %d, dest %d, nattch %lu, still \"%s\"\n", ds.shm_perm.__key,
           (ds.shm_perm.mode & SHM_DEST) != 0, (unsigned long)ds.shm_nattch, p);
    printf("the key is free again: %s\n", res(shmget(key, 100, 0600)));
    printf("shmdt(last): %s\n", res(shmdt(p)));
    printf("IPC_STAT after the last detach: %s\n", res(shmctl(id, IPC_STAT, &ds)));
}

static void on_signal(int sig) {
    (void)sig;
}

static void semaphores(void) {
    printf("-- semaphores\n");
    int id = semget(IPC_PRIVATE, 3, 0600);
    printf("semget(3): %s\n", res(id));
    printf("semget(0 semaphores): %s\n", res(semget(IPC_PRIVATE, 0, 0600)));
    unsigned short all[3] = {1, 0, 5};
    printf("SETALL: %s\n", res(semctl(id, 0, SETALL, (union semun){.array = all})));
    unsigned short got[3] = {9, 9, 9};
    semctl(id, 0, GETALL, (union semun){.array = got});
    printf("GETALL: %d %d %d\n", got[0], got[1], got[2]);
    printf("SETVAL 32768: %s\n", res(semctl(id, 1, SETVAL, (union semun){.val = 32768})));
    printf("SETVAL 2: %s\n", res(semctl(id, 1, SETVAL, (union semun){.val = 2})));
    printf("GETVAL: %d\n", semctl(id, 1, GETVAL));
    printf("GETVAL of semaphore 3: %s\n", res(semctl(id, 3, GETVAL)));
    printf("GETPID mine: %d\n", semctl(id, 1, GETPID) == getpid());
    struct semid_ds ds;
    union semun arg = {.buf = &ds};
    semctl(id, 0, IPC_STAT, arg);
    printf("IPC_STAT: nsems %lu, mode %o\n", (unsigned long)ds.sem_nsems, ds.sem_perm.mode & 0777);
    printf("take 2 from 1, IPC_NOWAIT: %s\n", res(sem_change(id, 0, -2, IPC_NOWAIT)));
    struct sembuf two[2] = {{0, -1, 0}, {1, -3, IPC_NOWAIT}};
    printf("two operations, the second cannot: %s, values unchanged %d %d\n", res(semop(id, two, 2)),
           semctl(id, 0, GETVAL), semctl(id, 1, GETVAL));
    struct timespec t = {0, 100 * 1000 * 1000};
    struct sembuf wait0 = {2, -6, 0};
    printf("semtimedop 100 ms: %s\n", res(semtimedop(id, &wait0, 1, &t)));
    printf("add past 32767: %s\n", res(sem_change(id, 2, 32767, 0)));
    printf("semaphore 7: %s\n", res(sem_change(id, 7, 1, 0)));
    printf("no operations: %s\n", res(semop(id, two, 0)));
    static struct sembuf many[501];
    printf("501 operations: %s\n", res(semop(id, many, 501)));
    printf("an id that is none: %s\n", res(sem_change(id + 1, 0, 1, 0)));

    /* SEM_UNDO: a child takes and adds with undo, and exits: undone. */
    fflush(stdout);
    pid_t c = fork();
    if (c == 0) {
        sem_change(id, 2, -5, SEM_UNDO);
        sem_change(id, 0, 3, SEM_UNDO);
        printf("child with undo: %d %d\n", semctl(id, 0, GETVAL), semctl(id, 2, GETVAL));
        fflush(stdout);
        _exit(0);
    }
    int st;
    waitpid(c, &st, 0);
    printf("after its exit: %d %d\n", semctl(id, 0, GETVAL), semctl(id, 2, GETVAL));

    /* Waiting for zero, and for a value. */
    fflush(stdout);
    c = fork();
    if (c == 0) {
        int r = sem_change(id, 1, 0, 0);
        printf("child's wait for zero: %s, value %d\n", res(r), semctl(id, 1, GETVAL));
        fflush(stdout);
        r = sem_change(id, 1, -4, 0);
        printf("child took 4: %s\n", res(r));
        fflush(stdout);
        _exit(0);
    }
    until_waiting(id, 1, GETZCNT, 1);
    printf("GETZCNT %d, GETNCNT %d\n", semctl(id, 1, GETZCNT), semctl(id, 1, GETNCNT));
    sem_change(id, 1, -2, 0);
    until_waiting(id, 1, GETNCNT, 1);
    printf("GETZCNT %d, GETNCNT %d\n", semctl(id, 1, GETZCNT), semctl(id, 1, GETNCNT));
    sem_change(id, 1, 4, 0);
    waitpid(c, &st, 0);

    /* A signal with SA_RESTART: semop is never restarted. */
    fflush(stdout);
    c = fork();
    if (c == 0) {
        struct sigaction sa = {0};
        sa.sa_flags = SA_RESTART;
        sa.sa_handler = on_signal;
        sigaction(SIGUSR1, &sa, NULL);
        int r = sem_change(id, 1, -1, 0);
        printf("child's semop, signal under SA_RESTART: %s\n", res(r));
        fflush(stdout);
        _exit(0);
    }
    until_waiting(id, 1, GETNCNT, 1);
    kill(c, SIGUSR1);
    waitpid(c, &st, 0);

    /* IPC_RMID wakes a waiter with EIDRM. */
    fflush(stdout);
    c = fork();
    if (c == 0) {
        int r = sem_change(id, 1, -1, 0);
        printf("child's semop when the set is removed: %s\n", res(r));
        fflush(stdout);
        _exit(0);
    }
    until_waiting(id, 1, GETNCNT, 1);
    int r = semctl(id, 0, IPC_RMID);
    waitpid(c, &st, 0);
    printf("IPC_RMID: %s\n", res(r));
    printf("GETVAL after: %s\n", res(semctl(id, 0, GETVAL)));
}

struct msg {
    long mtype;
    char text[64];
};

static void send(int q, long type, const char *text) {
    struct msg m = {type, ""};
    strcpy(m.text, text);
    if (msgsnd(q, &m, strlen(text) + 1, 0) < 0)
        printf("msgsnd: %s\n", strerror(errno));
}

static void receive(int q, const char *what, long type, size_t size, int flags) {
    struct msg m = {0, ""};
    ssize_t n = msgrcv(q, &m, size, type, flags);
    if (n < 0)
        printf("%s: %s\n", what, strerror(errno));
    else
        printf("%s: type %ld, %zd bytes \"%.*s\"\n", what, m.mtype, n, (int)n, m.text);
}

static void message_queues(void) {
    printf("-- message queues\n");
    int q = msgget(IPC_PRIVATE, 0600);
    printf("msgget: %s\n", res(q));
    send(q, 3, "three");
    send(q, 1, "one");
    send(q, 2, "two");
    send(q, 1, "one again");
    struct msqid_ds ds;
    msgctl(q, IPC_STAT, &ds);
    printf("IPC_STAT: qnum %lu, cbytes %lu, qbytes %lu, lspid mine %d\n", (unsigned long)ds.msg_qnum,
           (unsigned long)ds.__msg_cbytes, (unsigned long)ds.msg_qbytes, ds.msg_lspid == getpid());
    struct msg bad = {0, "x"};
    printf("type 0: %s\n", res(msgsnd(q, &bad, 2, 0)));
    printf("8193 bytes: %s\n", res(msgsnd(q, &bad, 8193, 0)));
    receive(q, "type 2", 2, 64, 0);
    receive(q, "type -2", -2, 64, 0);
    receive(q, "type 1 except", 1, 64, MSG_EXCEPT);
    receive(q, "3 bytes", 0, 3, 0);
    receive(q, "3 bytes, MSG_NOERROR", 0, 3, MSG_NOERROR);
    receive(q, "empty, IPC_NOWAIT", 0, 64, IPC_NOWAIT);
    receive(q, "type 5, IPC_NOWAIT", 5, 64, IPC_NOWAIT);
    ds.msg_qbytes = 100;
    printf("qbytes 100: %s\n", res(msgctl(q, IPC_SET, &ds)));
    ds.msg_qbytes = 1 << 20;
    printf("qbytes 1 MiB: %s\n", res(msgctl(q, IPC_SET, &ds)));
    struct msg big = {1, ""};
    printf("60 bytes: %s\n", res(msgsnd(q, &big, 60, IPC_NOWAIT)));
    printf("60 more, IPC_NOWAIT: %s\n", res(msgsnd(q, &big, 60, IPC_NOWAIT)));
    receive(q, "drained", 0, 64, 0);

    /* A producer and a consumer: the queue holds two messages at most. */
    ds.msg_qbytes = 40;
    msgctl(q, IPC_SET, &ds);
    fflush(stdout);
    pid_t c = fork();
    if (c == 0) {
        long sum = 0;
        int n = 0;
        for (;;) {
            struct msg m;
            ssize_t r = msgrcv(q, &m, sizeof m.text, -2, 0);
            if (r < 0 || m.mtype == 2)
                break;
            sum += atol(m.text);
            n++;
        }
        printf("consumer: %d messages, sum %ld\n", n, sum);
        fflush(stdout);
        _exit(0);
    }
    for (int i = 1; i <= 200; i++) {
        char t[16];
        snprintf(t, sizeof t, "%d", i);
        send(q, 1, t);
    }
    send(q, 2, "end");
    int st;
    waitpid(c, &st, 0);

    /* A receiver woken by IPC_RMID. */
    fflush(stdout);
    c = fork();
    if (c == 0) {
        receive(q, "child's msgrcv when the queue is removed", 0, 64, 0);
        fflush(stdout);
        _exit(0);
    }
    for (int i = 0; i < 20; i++)
        usleep(10000);
    int r = msgctl(q, IPC_RMID, NULL);
    waitpid(c, &st, 0);
    printf("IPC_RMID: %s\n", res(r));
}

/* Two processes add to a counter in a shared segment, a semaphore as their lock. */
static void counter(void) {
    printf("-- a counter under a semaphore\n");
    int shm = shmget(IPC_PRIVATE, sizeof(long), 0600);
    int sem = semget(IPC_PRIVATE, 1, 0600);
    semctl(sem, 0, SETVAL, (union semun){.val = 1});
    volatile long *n = shmat(shm, NULL, 0);
    shmctl(shm, IPC_RMID, NULL);
    fflush(stdout);
    pid_t c = fork();
    for (int i = 0; i < 500; i++) {
        sem_change(sem, 0, -1, SEM_UNDO);
        long v = *n;
        if (i % 50 == 0)
            sched_yield();
        *n = v + 1;
        sem_change(sem, 0, 1, SEM_UNDO);
    }
    if (c == 0)
        _exit(0);
    int st;
    waitpid(c, &st, 0);
    printf("counter: %ld\n", *n);
    semctl(sem, 0, IPC_RMID);
    shmdt((void *)n);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    shared_memory();
    semaphores();
    message_queues();
    counter();
    return 0;
}
