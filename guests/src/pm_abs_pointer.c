/* pm_abs_pointer: a persistent linked list whose nodes link by ABSOLUTE virtual addresses.  Every
 * store is persisted in order, so recovery succeeds as long as the pool is mapped where it was
 * when the list was built, which is not guaranteed (ASLR, another process, a bigger mapping).
 * `ferrite crash --remap` maps the pool elsewhere in recovery and exposes it: recovery follows a
 * stale pointer and faults.  The twin (pm_abs_pointer_fixed.c) stores offsets from the pool base.
 * Usage: pm_abs_pointer [POOL]           builds a 5-node list, prints `sum 15`, exits 0
 *        pm_abs_pointer POOL check       walks the list of an existing pool, prints `sum N` */
#include "pm.h"

struct node {
    uint64_t value;
    struct node *next; /* BUG: an absolute address stored in PM */
};

struct root {
    struct node *head;
    struct node nodes[8];
};

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : PM_DEFAULT_POOL;
    int check = argc > 2 && strcmp(argv[2], "check") == 0;
    struct root *r = check ? pm_open(path, 4096, 0) : pm_map(path, 4096);
    if (!check) {
        memset(r, 0, sizeof *r);
        persist(r, sizeof *r);
        for (int i = 0; i < 5; i++) {
            struct node *n = &r->nodes[i];
            n->value = (uint64_t)i + 1;
            n->next = r->head;
            persist(n, sizeof *n);
            r->head = n; /* STORE: the head pointer */
            persist(&r->head, sizeof r->head);
        }
    }
    uint64_t sum = 0;
    for (struct node *n = r->head; n; n = n->next)
        sum += n->value; /* DEREF: follows the stored address */
    printf("sum %llu\n", (unsigned long long)sum);
    return 0;
}
