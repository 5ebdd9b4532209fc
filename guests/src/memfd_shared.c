/* memfd_shared: a memfd written by a second thread.  Main creates a memfd holding 'a', a thread
 * increments the byte, main prints it after the join ("b").  Under `--explore`, a snapshot taken
 * where the second thread can first run would share the memfd's memory with every run restored
 * from it (each would read what the one before wrote), so ferrite refuses to snapshot while a
 * memfd is open.
 * Usage: memfd_shared        prints "b", exits 0 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

static int fd;

static void *bump(void *arg)
{
    (void)arg;
    char c;
    if (pread(fd, &c, 1, 0) != 1)
        return NULL;
    c++;
    if (pwrite(fd, &c, 1, 0) != 1)
        return NULL;
    return NULL;
}

int main(void)
{
    fd = memfd_create("shared", 0);
    if (fd < 0)
        return 1;
    char c = 'a';
    if (pwrite(fd, &c, 1, 0) != 1)
        return 1;
    pthread_t t;
    pthread_create(&t, NULL, bump, NULL);
    pthread_join(t, NULL);
    if (pread(fd, &c, 1, 0) != 1)
        return 1;
    printf("%c\n", c);
    return 0;
}
