// Pending signals as Linux keeps them, compared with the native run:
// 1. sigaction(SIG_IGN), or SIG_DFL of a signal whose default is to ignore it, discards that
//    signal where it is pending, blocked or not: the thread's own set, another thread's and the
//    process's shared set (Linux's do_sigaction -> flush_sigqueue_mask).
// 2. A pending ignored signal does not hold back the signals behind it: a handled one runs and a
//    fatal one kills as soon as the mask lets them through.
// 3. raise() (tgkill to the caller) of a signal the caller blocks stays pending for the caller,
//    even if another thread does not block it; kill(getpid()) goes to a thread that does not
//    block it; a default action that kills takes the whole process.
// 4. A signal sent to the process is pending for every thread (sigpending), and one thread's
//    sigwait takes it for all; one sent to a thread is that thread's.
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t usr1_runs, usr2_runs, urg_runs;
static volatile pid_t usr2_tid;

static void on_usr1(int s) { usr1_runs++; }
static void on_usr2(int s) {
    usr2_runs++;
    usr2_tid = gettid();
}
static void on_urg(int s) { urg_runs++; }

static void handle(int sig, void (*h)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = h;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, NULL) != 0) {
        perror("sigaction");
        exit(1);
    }
}

static void mask(int how, int a, int b) {
    sigset_t s;
    sigemptyset(&s);
    if (a)
        sigaddset(&s, a);
    if (b)
        sigaddset(&s, b);
    pthread_sigmask(how, &s, NULL);
}

static int pending(int sig) {
    sigset_t s;
    sigpending(&s);
    return sigismember(&s, sig);
}

static void tgkill_self(int sig) { syscall(SYS_tgkill, getpid(), gettid(), sig); }

static void status(const char *what, int st) {
    if (WIFEXITED(st))
        printf("%s: exited %d\n", what, WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        printf("%s: killed by %d\n", what, WTERMSIG(st));
}

static pthread_barrier_t bar;
static pid_t other_tid;
static int other_saw[4];

// Part 1's other thread: blocks SIGUSR1, is sent one, looks after main has ignored it.
static void *ignore_other(void *arg) {
    mask(SIG_BLOCK, SIGUSR1, 0);
    other_tid = gettid();
    pthread_barrier_wait(&bar); // 1: blocked
    pthread_barrier_wait(&bar); // 2: main sent it
    other_saw[0] = pending(SIGUSR1);
    pthread_barrier_wait(&bar); // 3: looked
    pthread_barrier_wait(&bar); // 4: main ignored it
    other_saw[1] = pending(SIGUSR1);
    return NULL;
}

static void part1(void) {
    handle(SIGUSR1, on_usr1);
    handle(SIGUSR2, on_usr2);
    handle(SIGURG, on_urg);
    mask(SIG_BLOCK, SIGUSR1, SIGUSR2);
    tgkill_self(SIGUSR1);       // the thread's own set
    kill(getpid(), SIGUSR2);    // the process's shared set
    int before1 = pending(SIGUSR1), before2 = pending(SIGUSR2);
    signal(SIGUSR1, SIG_IGN);
    signal(SIGUSR2, SIG_IGN);
    int after1 = pending(SIGUSR1), after2 = pending(SIGUSR2);
    handle(SIGUSR1, on_usr1);
    handle(SIGUSR2, on_usr2);
    mask(SIG_UNBLOCK, SIGUSR1, SIGUSR2);
    printf("1. pending before SIG_IGN: USR1 %d USR2 %d; after: USR1 %d USR2 %d; handlers ran %d %d\n", before1,
           before2, after1, after2, usr1_runs, usr2_runs);

    // SIG_DFL for a signal ignored by default discards it too; SIG_DFL of one that is not keeps it.
    mask(SIG_BLOCK, SIGURG, SIGUSR1);
    tgkill_self(SIGURG);
    tgkill_self(SIGUSR1);
    signal(SIGURG, SIG_DFL);
    signal(SIGUSR1, SIG_DFL);
    printf("1. after SIG_DFL: URG pending %d, USR1 pending %d\n", pending(SIGURG), pending(SIGUSR1));
    signal(SIGUSR1, SIG_IGN); // discards it before it is unblocked
    mask(SIG_UNBLOCK, SIGURG, SIGUSR1);
    handle(SIGUSR1, on_usr1);

    // Another thread's pending signal goes too.
    pthread_t t;
    pthread_barrier_init(&bar, NULL, 2);
    pthread_create(&t, NULL, ignore_other, NULL);
    pthread_barrier_wait(&bar); // 1
    pthread_kill(t, SIGUSR1);
    pthread_barrier_wait(&bar); // 2
    pthread_barrier_wait(&bar); // 3
    signal(SIGUSR1, SIG_IGN);
    pthread_barrier_wait(&bar); // 4
    pthread_join(t, NULL);
    pthread_barrier_destroy(&bar);
    handle(SIGUSR1, on_usr1);
    printf("1. other thread's SIGUSR1 pending: before %d, after SIG_IGN %d; handler ran %d\n", other_saw[0],
           other_saw[1], usr1_runs);
}

static void part2(void) {
    // An ignored signal pending before a handled one: the handler runs when both are unblocked,
    // before the next instruction after sigprocmask.
    usr2_runs = 0;
    mask(SIG_BLOCK, SIGUSR1, SIGUSR2);
    signal(SIGUSR1, SIG_IGN);
    tgkill_self(SIGUSR1); // blocked: kept although ignored
    kill(getpid(), SIGUSR2);
    int kept = pending(SIGUSR1);
    mask(SIG_UNBLOCK, SIGUSR1, SIGUSR2);
    int ran = usr2_runs;
    printf("2. ignored SIGUSR1 kept while blocked: %d; SIGUSR2 handled at the unblock: %d\n", kept, ran);

    // ... and a fatal one behind it kills at the unblock.
    fflush(stdout);
    pid_t c = fork();
    if (c == 0) {
        mask(SIG_BLOCK, SIGUSR1, SIGTERM);
        tgkill_self(SIGUSR1);
        kill(getpid(), SIGTERM);
        mask(SIG_UNBLOCK, SIGUSR1, SIGTERM);
        static const char msg[] = "2. child still alive after the unblock\n";
        write(1, msg, sizeof msg - 1);
        _exit(0);
    }
    int st;
    waitpid(c, &st, 0);
    status("2. child with SIGTERM behind an ignored SIGUSR1", st);
    handle(SIGUSR1, on_usr1);
}

// Part 3's other thread: does not block SIGUSR1, SIGUSR2 or SIGTERM; waits for SIGUSR2.
static void *unblocked_other(void *arg) {
    other_tid = gettid();
    pthread_barrier_wait(&bar);
    while (!usr2_runs)
        pause();
    return NULL;
}

static void part3(void) {
    signal(SIGUSR1, SIG_DFL);
    usr2_runs = 0;
    pthread_t t;
    pthread_barrier_init(&bar, NULL, 2);
    pthread_create(&t, NULL, unblocked_other, NULL);
    pthread_barrier_wait(&bar);
    // raise() of a blocked signal whose default kills: pending for this thread only.
    mask(SIG_BLOCK, SIGUSR1, SIGUSR2);
    raise(SIGUSR1);
    int mine = pending(SIGUSR1);
    sigset_t w;
    sigemptyset(&w);
    sigaddset(&w, SIGUSR1);
    int got = 0;
    siginfo_t si;
    got = sigwaitinfo(&w, &si);
    printf("3. raise of a blocked SIGUSR1: alive, pending %d, sigwaitinfo %d code %d\n", mine, got,
           si.si_code);

    // kill(getpid()) of a signal this thread blocks goes to the one that does not.
    usr2_tid = 0;
    kill(getpid(), SIGUSR2);
    pthread_join(t, NULL);
    printf("3. kill(getpid(), SIGUSR2): handled %d time(s), by the other thread: %s\n", usr2_runs,
           usr2_tid == other_tid ? "yes" : "no");
    mask(SIG_UNBLOCK, SIGUSR1, SIGUSR2);
    pthread_barrier_destroy(&bar);

    // A fatal signal sent to the process kills every thread when one does not block it.
    fflush(stdout);
    pid_t c = fork();
    if (c == 0) {
        usr2_runs = 0;
        pthread_barrier_init(&bar, NULL, 2);
        pthread_create(&t, NULL, unblocked_other, NULL);
        pthread_barrier_wait(&bar);
        mask(SIG_BLOCK, SIGTERM, 0);
        kill(getpid(), SIGTERM);
        pthread_join(t, NULL);
        static const char msg[] = "3. child still alive after kill(SIGTERM)\n";
        write(1, msg, sizeof msg - 1);
        _exit(0);
    }
    int st;
    waitpid(c, &st, 0);
    status("3. child sending itself SIGTERM, blocked by main only", st);

    // tgkill of a blocked fatal signal: pending for that thread until it unblocks it.
    c = fork();
    if (c == 0) {
        usr2_runs = 0;
        pthread_barrier_init(&bar, NULL, 2);
        pthread_create(&t, NULL, unblocked_other, NULL);
        pthread_barrier_wait(&bar);
        mask(SIG_BLOCK, SIGTERM, 0);
        tgkill_self(SIGTERM);
        printf("3. child alive with SIGTERM pending %d\n", pending(SIGTERM));
        fflush(stdout);
        mask(SIG_UNBLOCK, SIGTERM, 0);
        static const char msg[] = "3. child still alive after the unblock\n";
        write(1, msg, sizeof msg - 1);
        _exit(0);
    }
    waitpid(c, &st, 0);
    status("3. child with a thread-directed SIGTERM", st);
}

// Part 4's other thread: blocks SIGUSR1 and SIGUSR2, looks at what is pending, takes one.
static void *shared_other(void *arg) {
    mask(SIG_BLOCK, SIGUSR1, SIGUSR2);
    pthread_barrier_wait(&bar); // 1: blocked
    pthread_barrier_wait(&bar); // 2: main sent them
    other_saw[0] = pending(SIGUSR1);
    other_saw[1] = pending(SIGUSR2);
    sigset_t w;
    sigemptyset(&w);
    sigaddset(&w, SIGUSR1);
    sigaddset(&w, SIGUSR2);
    int sig = 0;
    sigwait(&w, &sig);
    other_saw[2] = sig;
    pthread_barrier_wait(&bar); // 3: took one
    return NULL;
}

static void part4(void) {
    handle(SIGUSR1, on_usr1);
    pthread_t t;
    pthread_barrier_init(&bar, NULL, 2);
    mask(SIG_BLOCK, SIGUSR1, SIGUSR2);
    pthread_create(&t, NULL, shared_other, NULL);
    pthread_barrier_wait(&bar); // 1
    kill(getpid(), SIGUSR1); // the process's
    tgkill_self(SIGUSR2);    // this thread's
    pthread_barrier_wait(&bar); // 2
    pthread_barrier_wait(&bar); // 3
    pthread_join(t, NULL);
    printf("4. other thread sees USR1 %d USR2 %d, its sigwait takes %d; main then has USR1 %d USR2 %d\n",
           other_saw[0], other_saw[1], other_saw[2], pending(SIGUSR1), pending(SIGUSR2));
    signal(SIGUSR2, SIG_IGN);
    mask(SIG_UNBLOCK, SIGUSR1, SIGUSR2);
    printf("4. SIGUSR1 handler ran %d time(s)\n", usr1_runs);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    part1();
    part2();
    part3();
    part4();
    printf("done\n");
    return 0;
}
