/* pm_abs_pointer_fixed: the twin of pm_abs_pointer.c whose nodes link by offsets from the pool
 * base (0: none), so the list survives being mapped at another address (`ferrite crash
 * --remap`).
 * Usage: pm_abs_pointer_fixed [POOL]      builds a 5-node list, prints `sum 15`, exits 0
 *        pm_abs_pointer_fixed POOL check  walks the list of an existing pool, prints `sum N` */
#include "pm.h"

struct node {
    uint64_t value;
    uint64_t next; /* FIX: an offset from the pool base */
};

struct root {
    uint64_t head;
    struct node nodes[8];
};

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    int check = argc > 2 && strcmp(argv[2], "check") == 0;
    struct root *r = check ? pm_open(path, 4096, 0) : pm_map(path, 4096);
    char *base = (char *)r;
    if (!check) {
        memset(r, 0, sizeof *r);
        persist(r, sizeof *r);
        for (int i = 0; i < 5; i++) {
            struct node *n = &r->nodes[i];
            n->value = (uint64_t)i + 1;
            n->next = r->head;
            persist(n, sizeof *n);
            r->head = (uint64_t)((char *)n - base);
            persist(&r->head, sizeof r->head);
        }
    }
    uint64_t sum = 0;
    for (uint64_t off = r->head; off; off = ((struct node *)(base + off))->next)
        sum += ((struct node *)(base + off))->value;
    printf("sum %llu\n", (unsigned long long)sum);
    return 0;
}
