/* omp_lock_no: one lock guarding the counter, taken with omp_set_lock or, when free,
 * omp_test_lock.  Race: no. */
#include <omp.h>
#include <stdio.h>

static omp_lock_t lock;
static int counter;

int main(void)
{
    omp_init_lock(&lock);
#pragma omp parallel for num_threads(2)
    for (int i = 0; i < 16; i++) {
        if (i % 2 == 0) {
            omp_set_lock(&lock);
        } else {
            while (!omp_test_lock(&lock))
                ;
        }
        counter += i;
        omp_unset_lock(&lock);
    }
    omp_destroy_lock(&lock);
    printf("%d\n", counter);
    return 0;
}
