/* omp_forever_no: omp_forever_yes with one critical name for both sides, so the count's
 * updates exclude each other.  Given an argument, both loop for ever, and a run stops at the
 * instruction budget with nothing to report but the hang.  Race: no. */
#include <stdio.h>

static int count, cap = 8;

int main(int argc, char **argv)
{
    (void)argv;
    long rounds = argc > 1 ? -1 : 300; /* -1: for ever */
#pragma omp parallel sections num_threads(2)
    {
#pragma omp section
        for (long n = 0; n != rounds; n++) {
#pragma omp critical(count)
            if (count < cap) count++;
        }
#pragma omp section
        for (long n = 0; n != rounds; n++) {
#pragma omp critical(count)
            if (count > 0) count--;
        }
    }
    printf("%d\n", count);
    return 0;
}
