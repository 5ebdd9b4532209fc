/* proc_kill_parent [every]: signals that end the first process from another one.
 * No argument: a child sends its parent (the first process) SIGTERM and exits; the parent,
 * waiting for the child, dies of it: status 143, natively and under ferrite (the run's end,
 * not a zombie first process whose child runs on into a false deadlock).
 * `every`: kill(-1, SIGKILL) as Linux's kill_something_info does it: every process but the
 * caller, so the first process survives and its child dies of SIGKILL; with no other process
 * left, kill(-1, ...) is ESRCH; then a child's kill(-1, SIGKILL) kills the first process
 * (status 137). NOT for native runs in `every` mode: natively kill(-1) reaches every process
 * of the user. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int every = argc > 1 && !strcmp(argv[1], "every");
    if (!every) {
        if (fork() == 0) {
            kill(getppid(), SIGTERM);
            _exit(0); /* not pause(): natively the orphan would outlive the test */
        }
        int st;
        wait(&st);
        printf("the parent survived its child's SIGTERM\n");
        return 0;
    }
    pid_t c = fork();
    if (c == 0) {
        pause();
        _exit(1);
    }
    int r = kill(-1, SIGKILL);
    int st = 0;
    waitpid(c, &st, 0);
    printf("kill(-1, SIGKILL) = %d; the child: %s %d\n", r, WIFSIGNALED(st) ? "killed by" : "exited", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    r = kill(-1, SIGTERM);
    printf("kill(-1, SIGTERM) alone: %d %s\n", r, r ? strerrorname_np(errno) : "");
    fflush(stdout);
    if (fork() == 0) {
        kill(-1, SIGKILL);
        pause();
        _exit(1);
    }
    wait(&st);
    printf("the parent survived its child's kill(-1, SIGKILL)\n");
    return 0;
}
