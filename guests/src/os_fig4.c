/* os_fig4: OSCS paper Figure 4, the KB3 order violation (Mozilla, from Yu and
 * Narayanasamy, ISCA'09; Table 2 KB3-O).  T1 announces it is waiting
 * (mWaiting) and waits while mProcessing is set; T2 clears mProcessing and
 * signals only if mWaiting is already set.  If T2's section runs between
 * T1's check and T1's wait the signal is lost (the original hangs; this guest
 * waits with a timeout and re-checks).  The sections conflict on both flags
 * without read-write sequences: OSCS reports them.  Prints `done`.  Exit 0. */
#include <pthread.h>
#include <stdio.h>
#include <time.h>

static pthread_mutex_t L = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static volatile int mProcessing = 1, mWaiting;

static void *t1(void *arg)
{
    pthread_mutex_lock(&L);
    mWaiting = 1; /* OSCS: 1.4 mWaiting */
    while (mProcessing) { /* OSCS: 1.5 mProcessing */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&cv, &L, &ts);
    }
    pthread_mutex_unlock(&L);
    return NULL;
}

static void *t2(void *arg)
{
    pthread_mutex_lock(&L);
    mProcessing = 0; /* OSCS: 2.2 mProcessing */
    if (mWaiting) /* OSCS: 2.3 mWaiting */
        pthread_cond_signal(&cv);
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
