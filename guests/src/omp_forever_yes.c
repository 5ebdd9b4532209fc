/* omp_forever_yes: a producer and a consumer section update one count under critical sections
 * of different names, which exclude nothing: the updates race.  Given an argument, both loop
 * for ever (a service that never ends), and a run stops at the instruction budget: the races it
 * saw by then stand.  Race: yes. */
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
#pragma omp critical(fill)
            if (count < cap) count++; /* RACE: producer, under critical(fill) */
        }
#pragma omp section
        for (long n = 0; n != rounds; n++) {
#pragma omp critical(drain)
            if (count > 0) count--; /* RACE: consumer, under critical(drain) */
        }
    }
    printf("%d\n", count);
    return 0;
}
