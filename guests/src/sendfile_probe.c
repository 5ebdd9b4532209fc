/* sendfile_probe: sendfile(2) as Linux does it — from a file at an offset pointer (the file's
 * own offset untouched) or at the file's offset (then advanced), into a pipe, a socket and a
 * file, a full non-blocking pipe (a short count, then EAGAIN), and its errors. Prints the same
 * natively and under ferrite. Usage: sendfile_probe (in a scratch directory) */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#define SIZE 200000

static char data[SIZE], got[SIZE];

static void show(const char *what, long r)
{
    if (r < 0)
        printf("%s: %s\n", what, strerror(errno));
    else
        printf("%s: %ld\n", what, r);
}

/* Reads `n` bytes from `fd` and says whether they are the file's bytes from `at`. */
static void check(const char *what, int fd, long at, long n)
{
    long have = 0;
    while (have < n) {
        long r = read(fd, got + have, n - have);
        if (r <= 0)
            break;
        have += r;
    }
    printf("  %s: %ld bytes, %s\n", what, have, have == n && !memcmp(got, data + at, n) ? "the file's" : "WRONG");
}

int main(void)
{
    for (int i = 0; i < SIZE; i++)
        data[i] = (char)('a' + (i * 7 + i / 26) % 26);
    int w = open("sf.dat", O_CREAT | O_TRUNC | O_WRONLY, 0644);
    if (write(w, data, SIZE) != SIZE)
        return 1;
    close(w);
    int f = open("sf.dat", O_RDONLY);
    int p[2];
    pipe(p);

    off_t off = 100;
    show("sendfile(pipe, file, &100, 50)", sendfile(p[1], f, &off, 50));
    printf("  offset pointer now %ld, file offset %ld\n", (long)off, (long)lseek(f, 0, SEEK_CUR));
    check("pipe", p[0], 100, 50);
    show("sendfile(pipe, file, NULL, 30)", sendfile(p[1], f, NULL, 30));
    printf("  file offset now %ld\n", (long)lseek(f, 0, SEEK_CUR));
    check("pipe", p[0], 0, 30);

    off = SIZE - 10;
    show("sendfile at 10 before the end, 100", sendfile(p[1], f, &off, 100));
    check("pipe", p[0], SIZE - 10, 10);
    show("sendfile at the end", sendfile(p[1], f, &off, 100));

    /* A full non-blocking pipe: what fits, then EAGAIN. */
    fcntl(p[1], F_SETFL, O_NONBLOCK);
    off = 0;
    long first = sendfile(p[1], f, &off, SIZE);
    printf("sendfile(non-blocking pipe, %d): %s\n", SIZE, first == 65536 ? "65536 (the pipe's room)" : "OTHER");
    show("sendfile(full non-blocking pipe)", sendfile(p[1], f, &off, 100));
    printf("  offset pointer now %ld\n", (long)off);
    check("pipe", p[0], 0, first);

    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    off = 1000;
    show("sendfile(socket, file, &1000, 5000)", sendfile(sv[0], f, &off, 5000));
    check("socket", sv[1], 1000, 5000);

    int out = open("sf.out", O_CREAT | O_TRUNC | O_RDWR, 0644);
    lseek(f, 0, SEEK_SET);
    show("sendfile(file, file, NULL, 7000)", sendfile(out, f, NULL, 7000));
    lseek(out, 0, SEEK_SET);
    check("file", out, 0, 7000);

    show("sendfile from a pipe", sendfile(sv[0], p[0], NULL, 10));
    show("sendfile into a read-only file", sendfile(f, f, NULL, 10));
    off = -1;
    show("sendfile at offset -1", sendfile(sv[0], f, &off, 10));
    int app = open("sf.out", O_WRONLY | O_APPEND);
    show("sendfile into an O_APPEND file", sendfile(app, f, NULL, 10));
    show("sendfile from a write-only file", sendfile(sv[0], app, NULL, 10));
    show("sendfile from a bad descriptor", sendfile(sv[0], 99, NULL, 10));
    fflush(stdout);
    off = 0;
    show("\nsendfile(stdout, file, &0, 26)", sendfile(1, f, &off, 26));
    return 0;
}
