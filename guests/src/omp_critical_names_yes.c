/* omp_critical_names_yes: one variable updated under two critical sections of different names,
 * which exclude nothing from each other.  Race: yes. */
#include <omp.h>
#include <stdio.h>

static int total;

int main(void)
{
#pragma omp parallel num_threads(2)
    {
        if (omp_get_thread_num() == 0) {
#pragma omp critical(left)
            total += 1; /* RACE: under critical(left) */
        } else {
#pragma omp critical(right)
            total += 2; /* RACE: under critical(right) */
        }
    }
    printf("%d\n", total);
    return 0;
}
