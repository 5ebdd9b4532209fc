/* setjmp_longjmp: setjmp/longjmp across several frames, nested jump buffers,
 * sigsetjmp/siglongjmp with savemask=0 (no rt_sigprocmask needed), volatile
 * locals surviving the jump.  Exit status 0. */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>

static jmp_buf env;
static sigjmp_buf senv;
static int depth_reached;

__attribute__((noinline)) static void dive(int depth, int target)
{
    volatile char pad[64]; /* give every frame some stack */
    pad[depth % 64] = (char)depth;
    depth_reached = depth + pad[depth % 64] - depth;
    if (depth == target)
        longjmp(env, depth * 10 + 1);
    if (depth > 1000)
        return;
    dive(depth + 1, target);
    printf("unreachable after dive %d\n", depth);
}

__attribute__((noinline)) static void sdive(int depth, int target)
{
    volatile long frame[8];
    frame[depth % 8] = depth;
    if (depth == target)
        siglongjmp(senv, (int)frame[depth % 8] + 100);
    if (depth > 1000)
        return;
    sdive(depth + 1, target);
}

/* longjmp(env, 0) must make setjmp return 1. */
__attribute__((noinline)) static void jump_zero(void)
{
    longjmp(env, 0);
}

static jmp_buf outer, inner;

__attribute__((noinline)) static void nested(int level)
{
    if (setjmp(inner) == 0) {
        printf("nested: inner set at level %d\n", level);
        longjmp(level > 0 ? outer : inner, 7);
    }
    printf("nested: returned to inner\n");
}

int main(void)
{
    volatile int counter = 0;
    volatile double dval = 1.5;

    /* 1. longjmp out of increasingly deep recursion, re-entering setjmp. */
    int rc = setjmp(env);
    if (rc != 0)
        printf("setjmp returned %d (depth %d, counter %d, dval %.2f)\n",
               rc, depth_reached, counter, dval);
    if (counter < 4) {
        counter++;
        dval *= 2;
        dive(0, counter * 3);
    }
    printf("after loop: counter %d dval %.2f\n", counter, dval);

    /* 2. longjmp with value 0 -> setjmp returns 1. */
    if ((rc = setjmp(env)) == 0)
        jump_zero();
    printf("longjmp(0) made setjmp return %d\n", rc);

    /* 3. sigsetjmp/siglongjmp without saving the signal mask. */
    volatile int srounds = 0;
    rc = sigsetjmp(senv, 0);
    if (rc != 0)
        printf("sigsetjmp returned %d\n", rc);
    if (srounds < 3) {
        srounds++;
        sdive(0, srounds * 5);
    }
    printf("sig rounds %d\n", srounds);

    /* 4. nested buffers: jump to an outer buffer from inside a frame that has
     *    its own (inner) buffer, and to the inner one from the same frame. */
    if ((rc = setjmp(outer)) == 0)
        nested(1);
    else
        printf("outer caught %d\n", rc);
    nested(0);

    printf("setjmp_longjmp done\n");
    return 0;
}
