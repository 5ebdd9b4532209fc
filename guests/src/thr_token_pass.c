/* thr_token_pass: two threads hand a token back and forth ROUNDS times (default 1,000)
 * through plain volatile flags, each spinning until it is its turn: no system call or locked
 * instruction anywhere in the exchange (`pause` in the spin with a second argument `pause`).
 * Only preemption at quantum ends lets it finish under a one-CPU-at-a-time scheduler.
 * Usage: thr_token_pass [ROUNDS] [pause]; prints the final token and exits 0. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile long turn; /* 0: ping's turn, 1: pong's */
static volatile long token;
static long rounds = 1000;
static int use_pause;

static void wait_for(long me)
{
    while (turn != me)
        if (use_pause)
            __asm__ volatile("pause");
}

static void *pong(void *arg)
{
    for (long i = 0; i < rounds; i++) {
        wait_for(1);
        token++;
        turn = 0;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        rounds = atol(argv[1]);
    use_pause = argc > 2 && strcmp(argv[2], "pause") == 0;
    pthread_t t;
    pthread_create(&t, NULL, pong, NULL);
    for (long i = 0; i < rounds; i++) {
        wait_for(0);
        token++;
        turn = 1;
    }
    pthread_join(t, NULL);
    printf("token: %ld\n", token);
    return token == 2 * rounds ? 0 : 1;
}
