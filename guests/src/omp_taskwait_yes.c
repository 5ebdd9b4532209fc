/* omp_taskwait_yes: the creator reads a task's result without waiting for it.  Race: yes. */
#include <stdio.h>

static int result, copy;

static int work(int n)
{
    int s = 0;
    for (int i = 0; i < n; i++)
        s += i;
    return s;
}

int main(void)
{
#pragma omp parallel num_threads(2)
#pragma omp single
    {
#pragma omp task
        result = work(10); /* RACE: the task writes */
        copy = result; /* RACE: the creator reads before any taskwait */
#pragma omp taskwait
    }
    printf("%d %d\n", result, copy);
    return 0;
}
