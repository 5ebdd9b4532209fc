/* os_fig3c: OSCS paper Figure 3(c), the Mozilla-1 bug from AVIO (Table 2
 * Mozilla1-A).  T1 sets gCurrentScript under lock L, compiles with it, and
 * later reads it back (1.9); T2 clears it under L.  Every access is locked,
 * but T1's section (1.2-1.5) and T2's (2.1-2.3) are unordered and each has a
 * write without a read-write sequence: OSCS reports the pair whether or not
 * the failing interleaving 1.3 - 2.2 - 1.9 happens (then 1.9 sees NULL; the
 * guest checks instead of crashing).  Prints `done`.  Exit 0. */
#include <pthread.h>
#include <stdio.h>

struct script { int len; };

static pthread_mutex_t L = PTHREAD_MUTEX_INITIALIZER;
static struct script *volatile gCurrentScript;
static struct script the_script = { 42 };
static volatile int compiled;

static void *t1(void *arg)
{
    pthread_mutex_lock(&L);
    gCurrentScript = &the_script; /* OSCS: 1.2 set */
    compiled = gCurrentScript->len;
    pthread_mutex_unlock(&L);
    pthread_mutex_lock(&L);
    struct script *s = gCurrentScript; /* OSCS: 1.9 use */
    pthread_mutex_unlock(&L);
    if (s)
        compiled += s->len;
    return NULL;
}

static void *t2(void *arg)
{
    pthread_mutex_lock(&L);
    gCurrentScript = NULL; /* OSCS: 2.2 clear */
    pthread_mutex_unlock(&L);
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    pthread_create(&a, NULL, t1, NULL);
    pthread_create(&b, NULL, t2, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("done\n");
    return 0;
}
