/* omp_task_yes: two sibling tasks created by one thread both update one variable; nothing
 * orders them.  Race: yes. */
#include <stdio.h>

static int x;

int main(void)
{
#pragma omp parallel num_threads(2)
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
