/* omp_task_shared_yes: tasks created in a loop each add into one shared accumulator.
 * Race: yes. */
#include <stdio.h>

static int acc;

int main(void)
{
#pragma omp parallel num_threads(2)
#pragma omp single
    {
        for (int i = 0; i < 6; i++) {
#pragma omp task firstprivate(i)
            acc += i; /* RACE: acc += i in every task */
        }
    }
    printf("%d\n", acc);
    return 0;
}
