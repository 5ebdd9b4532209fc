/* omp_task_onethread_yes: omp_task_yes on a team of one thread. The two sibling tasks run one
 * after the other on the only thread, but nothing in the program orders them: another runtime,
 * or another team size, may run them at once. The program never creates a second thread.
 * Race: yes. */
#include <stdio.h>

static int x;

int main(void)
{
#pragma omp parallel num_threads(1)
#pragma omp single
    {
#pragma omp task
        x += 1; /* RACE: first task */
#pragma omp task
        x += 2; /* RACE: second task */
    }
    printf("%d\n", x);
    return 0;
}
