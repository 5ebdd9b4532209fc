/* File times as programs use them: a host file's modification time (CPython compares it with
 * the one its __pycache__ recorded, make with its targets'), a file's time after the program
 * writes it, utimensat/utimes/utime/futimens, rename, and a directory changed by a creation.
 * Every line printed is the same natively and under ferrite (ferrite's own times are virtual,
 * so only their order is printed).
 *
 * usage: fs_times INPUT   (INPUT: a file whose modification time the caller set) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>
#include <utime.h>

static struct timespec mtime_of(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) {
        perror(path);
        struct timespec none = {0, 0};
        return none;
    }
    return st.st_mtim;
}

static int later(struct timespec a, struct timespec b) {
    return a.tv_sec > b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec > b.tv_nsec);
}

static void spin(void) {
    /* Time passes: a few million instructions (a few ms of the virtual clock), and a real sleep
     * natively. */
    volatile unsigned long x = 0;
    for (unsigned long i = 0; i < 3000000; i++)
        x += i;
    usleep(20000);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: fs_times INPUT\n");
        return 2;
    }
    struct timespec in = mtime_of(argv[1]);
    printf("input: %lld %ld\n", (long long)in.tv_sec, in.tv_nsec);
    struct stat st;
    stat(argv[1], &st);
    printf("input ctime and atime as set: %d\n", st.st_ctim.tv_sec >= in.tv_sec && st.st_atim.tv_sec > 0);

    struct timespec dir0 = mtime_of(".");
    spin();
    int fd = open("made.txt", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0) {
        perror("made.txt");
        return 1;
    }
    struct timespec made = mtime_of("made.txt");
    printf("made after the input: %d\n", later(made, in));
    printf("directory changed by the creation: %d\n", later(mtime_of("."), dir0) || later(dir0, mtime_of(".")));
    spin();
    if (write(fd, "hello\n", 6) != 6)
        return 1;
    struct timespec written = mtime_of("made.txt");
    printf("a write moves it on: %d\n", later(written, made));
    spin();
    struct timespec same = mtime_of("made.txt");
    printf("reading the time changes nothing: %d\n", !later(same, written) && !later(written, same));

    struct timespec ts[2] = {{1500000000, 0}, {1600000000, 500000000}};
    printf("utimensat: %d\n", utimensat(AT_FDCWD, "made.txt", ts, 0));
    struct timespec set = mtime_of("made.txt");
    printf("set: %lld %ld\n", (long long)set.tv_sec, set.tv_nsec);
    struct timespec omit[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};
    utimensat(AT_FDCWD, "made.txt", omit, 0);
    set = mtime_of("made.txt");
    printf("UTIME_OMIT keeps it: %lld %ld\n", (long long)set.tv_sec, set.tv_nsec);

    if (rename("made.txt", "moved.txt") != 0)
        perror("rename");
    struct timespec moved = mtime_of("moved.txt");
    printf("a rename keeps it: %lld %ld\n", (long long)moved.tv_sec, moved.tv_nsec);

    struct timeval tv[2] = {{1400000000, 0}, {1500000000, 250000}};
    printf("utimes: %d\n", utimes("moved.txt", tv));
    moved = mtime_of("moved.txt");
    printf("now: %lld %ld\n", (long long)moved.tv_sec, moved.tv_nsec);
    struct utimbuf ub = {1300000000, 1350000000};
    printf("utime: %d\n", utime("moved.txt", &ub));
    moved = mtime_of("moved.txt");
    printf("now: %lld %ld\n", (long long)moved.tv_sec, moved.tv_nsec);
    close(fd);
    fd = open("moved.txt", O_WRONLY);
    printf("futimens now: %d\n", futimens(fd, NULL));
    printf("futimens moved it to now: %d\n", later(mtime_of("moved.txt"), written) || !later(written, mtime_of("moved.txt")));
    struct timespec bad[2] = {{0, 0}, {0, 1000000000}};
    printf("bad nanoseconds refused: %d\n", utimensat(AT_FDCWD, "moved.txt", bad, 0));
    close(fd);
    unlink("moved.txt");
    return 0;
}
