/* Two processes, each waiting on a System V semaphore that only the other posts after its own
 * wait: Linux hangs forever; ferrite reports a deadlock finding at both semop calls. */
#include <stdio.h>
#include <sys/sem.h>
#include <sys/wait.h>
#include <unistd.h>

static void change(int id, int num, int op) {
    struct sembuf b = {(unsigned short)num, (short)op, 0};
    semop(id, &b, 1);
}

int main(void) {
    int id = semget(IPC_PRIVATE, 2, 0600);
    printf("each process waits for the other's post\n");
    fflush(stdout);
    if (fork() == 0) {
        change(id, 0, -1); /* DEADLOCK CHILD */
        change(id, 1, 1);
        _exit(0);
    }
    change(id, 1, -1); /* DEADLOCK PARENT */
    change(id, 0, 1);
    wait(NULL);
    return 0;
}
