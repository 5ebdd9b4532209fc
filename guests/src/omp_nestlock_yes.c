/* omp_nestlock_yes: a nestable lock taken twice by the updater, but the second field is also
 * updated after the lock is given back.  Race: yes. */
#include <omp.h>
#include <stdio.h>

struct pair {
    int a, b;
    omp_nest_lock_t lock;
};
static struct pair p;

static void add_a(struct pair *q, int v)
{
    omp_set_nest_lock(&q->lock);
    q->a += v;
    omp_unset_nest_lock(&q->lock);
}

int main(void)
{
    omp_init_nest_lock(&p.lock);
#pragma omp parallel num_threads(2)
    {
        omp_set_nest_lock(&p.lock);
        add_a(&p, 1);
        omp_unset_nest_lock(&p.lock);
        p.b += 1; /* RACE: b updated without the lock */
    }
    omp_destroy_nest_lock(&p.lock);
    printf("%d %d\n", p.a, p.b);
    return 0;
}
