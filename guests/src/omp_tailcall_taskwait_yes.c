/* omp_tailcall_taskwait_yes: omp_tailcall_taskwait_no with the second task's dependence
 * left out. Built with -O2, each task body still ends with `jmp GOMP_taskwait`; the two tasks
 * are now unordered, and so are their subtasks. Race: yes, on `a`. */
#include <stdio.h>

static int a;

int main(void)
{
#pragma omp parallel num_threads(2)
#pragma omp single
    {
#pragma omp task depend(inout : a) shared(a)
        {
#pragma omp task shared(a)
            a++; /* RACE: the first task's subtask */
#pragma omp taskwait
        }
#pragma omp task shared(a)
        {
#pragma omp task shared(a)
            a += 2; /* RACE: the second task's subtask */
#pragma omp taskwait
        }
    }
    printf("a=%d\n", a);
    return 0;
}
