/* proc_shared_truncate [parent|child]: a file mapped MAP_SHARED by two processes is truncated
 * by one of them; the other then touches a page past the new end and dies of SIGBUS, as on
 * Linux. `parent` (the default): a forked child truncates the file the parent mapped before the
 * fork, and the parent's touch kills it (135). `child`: a child maps the file itself, the parent
 * truncates it with an O_TRUNC open, and the child's touch kills the child (the parent prints
 * its status: 7 natively; under ferrite a child's unhandled fault ends the run with its finding,
 * 135). Before, only the truncating process's own mappings were cut at the new end: the other
 * process's touch raised SIGBUS in ferrite itself, which died without a word (SQLite's WAL
 * processes did it). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int in_child = argc > 1 && !strcmp(argv[1], "child");
    int fd = open("shared", O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, 8192))
        return 1;
    int ready[2], done[2];
    if (pipe(ready) || pipe(done))
        return 1;
    if (!in_child) {
        volatile char *p = mmap(0, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        p[4096] = 2;
        pid_t c = fork();
        if (c == 0) {
            (void)!ftruncate(fd, 100);
            _exit(0);
        }
        int st;
        waitpid(c, &st, 0);
        printf("the child truncated the file; the parent touches its second page\n");
        fflush(stdout);
        printf("read %d\n", p[4096]); /* SIGBUS in the parent */
        return 0;
    }
    pid_t c = fork();
    if (c == 0) {
        volatile char *p = mmap(0, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        p[4096] = 2;
        char x;
        close(done[1]);
        (void)!write(ready[1], "x", 1);
        (void)!read(done[0], &x, 1); /* EOF: the parent truncated */
        p[4096] = 3; /* SIGBUS in the child */
        _exit(0);
    }
    char x;
    (void)!read(ready[0], &x, 1);
    int again = open("shared", O_RDWR | O_TRUNC);
    close(done[1]);
    printf("the parent truncated the file: %s\n", again >= 0 ? "yes" : "no");
    fflush(stdout);
    int st;
    waitpid(c, &st, 0);
    printf("the child: %s %d\n", WIFSIGNALED(st) ? "killed by" : "exited", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    return 0;
}
