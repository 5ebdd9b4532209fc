/* unix_socket_file: binding an AF_UNIX socket to a path makes a socket file there, as on Linux:
 * stat says S_IFSOCK, the directory lists it, chmod changes it (Python's multiprocessing
 * forkserver chmods its listener's file), it stays when the socket closes (a connection is then
 * refused, another bind finds the name in use) until it is unlinked; a path reaches the socket
 * however it is spelt. Prints the same natively and under ferrite.
 * Usage: unix_socket_file (in a scratch directory) */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static void show(const char *what, int r)
{
    printf("%s: %s\n", what, r < 0 ? strerror(errno) : "ok");
}

static struct sockaddr_un at(const char *path)
{
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    strcpy(a.sun_path, path);
    return a;
}

static int bind_to(int s, const char *path)
{
    struct sockaddr_un a = at(path);
    return bind(s, (struct sockaddr *)&a, sizeof a);
}

static int connect_to(const char *path)
{
    int c = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = at(path);
    int r = connect(c, (struct sockaddr *)&a, sizeof a);
    int e = errno;
    close(c);
    errno = e;
    return r;
}

int main(void)
{
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    show("bind(s)", bind_to(l, "s"));
    show("listen", listen(l, 4));
    struct stat st;
    show("stat(s)", stat("s", &st));
    printf("a socket file: %s, size %ld\n", S_ISSOCK(st.st_mode) ? "yes" : "no", (long)st.st_size);
    DIR *d = opendir(".");
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strcmp(e->d_name, "s"))
            printf("listed as DT_SOCK: %s\n", e->d_type == DT_SOCK ? "yes" : "no");
    closedir(d);
    show("chmod(s, 0600)", chmod("s", 0600));
    stat("s", &st);
    printf("mode: %o\n", st.st_mode & 0777);
    int l2 = socket(AF_UNIX, SOCK_STREAM, 0);
    show("bind(s) again", bind_to(l2, "s"));
    show("connect(s)", connect_to("s"));
    show("connect(./s)", connect_to("./s"));
    mkdir("sub", 0755);
    chdir("sub");
    show("connect(../s) from sub", connect_to("../s"));
    show("connect(s) from sub", connect_to("s"));
    chdir("..");
    close(l);
    show("connect after close", connect_to("s"));
    show("the file stays", access("s", F_OK));
    show("bind(s) while the file stays", bind_to(l2, "s"));
    show("unlink(s)", unlink("s"));
    show("connect after unlink", connect_to("s"));
    show("bind(s) after unlink", bind_to(l2, "s"));
    show("listen", listen(l2, 4));
    show("connect(s)", connect_to("s"));
    close(open("plain", O_CREAT | O_WRONLY, 0644));
    show("connect(a plain file)", connect_to("plain"));
    int l3 = socket(AF_UNIX, SOCK_STREAM, 0);
    show("bind(no/such/dir)", bind_to(l3, "no/such/dir"));
    show("bind(plain)", bind_to(l3, "plain"));
    return 0;
}
