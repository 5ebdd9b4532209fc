/* exit_group_direct: writes one line with write(2), then printf()s a line that
 * stays in the stdio buffer, then calls _exit(5), which does not flush stdio.
 * The printf'd text is lost natively too (it has no newline, so even a
 * line-buffered terminal stdout loses it).  Expected stdout: "before _exit\n". */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(void)
{
    static const char msg[] = "before _exit\n";
    if (write(1, msg, strlen(msg)) < 0)
        return 1;
    printf("this text is buffered and lost");
    _exit(5);
}
