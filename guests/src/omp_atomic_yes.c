/* omp_atomic_yes: a counter incremented atomically by one thread and with a plain
 * read-modify-write by the other: atomicity of one side does not protect the other.
 * Race: yes. */
#include <omp.h>
#include <stdio.h>

static int hits;

int main(void)
{
#pragma omp parallel num_threads(2)
    {
        for (int i = 0; i < 8; i++) {
            if (omp_get_thread_num() == 0) {
#pragma omp atomic
                hits++;
            } else {
                hits = hits + 1; /* RACE: plain update of an atomic counter */
            }
        }
    }
    printf("%d\n", hits);
    return 0;
}
