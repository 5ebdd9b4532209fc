/* kv_client: the clients of a kv_server started in another process (`kv_server --serve POOL
 * ADDR`): two client threads, each on its own connection, issue N requests each (kv.h's
 * protocol: sets and gets of the same four keys, so the server's workers race on them), then
 * one more connection tells the server to shut down. Connections are retried while the server
 * has not bound its socket yet.
 * Usage: kv_client tcp:PORT|unix:PATH [N]; prints how many requests were answered, exits 0 when
 * every one was. */
#include <pthread.h>

#include "kv.h"

#define NCLIENTS 2

static struct sockaddr_storage addr;
static socklen_t addr_len;
static long requests;
static long answered[NCLIENTS];

static void *client(void *arg)
{
    int id = (int)(long)arg;
    int c = kv_connect((struct sockaddr *)&addr, addr_len);
    if (c < 0)
        return NULL;
    answered[id] = kv_client_requests(c, id, requests, NULL);
    close(c);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2 || kv_address(argv[1], &addr, &addr_len) != 0) {
        fprintf(stderr, "usage: kv_client tcp:PORT|unix:PATH [N]\n");
        return 2;
    }
    requests = argc > 2 ? atol(argv[2]) : 20;
    pthread_t cl[NCLIENTS];
    for (long k = 0; k < NCLIENTS; k++)
        pthread_create(&cl[k], NULL, client, (void *)k);
    long total = 0;
    for (int k = 0; k < NCLIENTS; k++) {
        pthread_join(cl[k], NULL);
        total += answered[k];
    }
    int c = kv_connect((struct sockaddr *)&addr, addr_len);
    char resp[16] = "";
    if (c < 0 || kv_request(c, "shutdown\n", resp, sizeof resp) != 0 || strcmp(resp, "BYE") != 0)
        fprintf(stderr, "kv_client: the server did not shut down\n");
    printf("kv: %ld of %ld requests answered\n", total, NCLIENTS * requests);
    return total != NCLIENTS * requests;
}
