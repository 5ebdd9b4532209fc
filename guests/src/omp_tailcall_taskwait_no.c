/* omp_tailcall_taskwait_no: two tasks ordered by a dependence, each creating a subtask and
 * waiting for it with `taskwait` as its last statement. Built with -O2 (guests/Makefile), gcc
 * ends each outlined task body with a tail call, `jmp GOMP_taskwait`, so the wait runs in the
 * body's frame and returns at its `ret`. Race: no (the second task starts after the first
 * ended, and the first ended after its subtask). */
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
            a++;
#pragma omp taskwait
        }
#pragma omp task depend(inout : a) shared(a)
        {
#pragma omp task shared(a)
            a += 2;
#pragma omp taskwait
        }
    }
    printf("a=%d\n", a);
    return 0;
}
