/* write_stderr: interleaves lines on stdout and stderr.  stdout is flushed
 * after every line and stderr is unbuffered, so with 2>&1 the merged order is
 * deterministic: out 0, err 0, out 1, err 1, ... Exit status 0. */
#include <stdio.h>

int main(void)
{
    setvbuf(stderr, NULL, _IONBF, 0);
    for (int i = 0; i < 5; i++) {
        printf("stdout line %d\n", i);
        fflush(stdout);
        fprintf(stderr, "stderr line %d\n", i);
    }
    fputs("stdout done\n", stdout);
    fflush(stdout);
    fputs("stderr done\n", stderr);
    return 0;
}
