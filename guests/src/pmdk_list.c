/* pmdk_list: libpmemobj (dynamically linked): pool create/open, a persistent list grown in
 * transactions under a pmemobj mutex. Prints the list; exits 0. */
#include <libpmemobj.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
POBJ_LAYOUT_BEGIN(list);
POBJ_LAYOUT_ROOT(list, struct root);
POBJ_LAYOUT_TOID(list, struct node);
POBJ_LAYOUT_END(list);
struct node { uint64_t value; TOID(struct node) next; };
struct root { PMEMmutex lock; uint64_t count; TOID(struct node) head; };
int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/objpool";
    PMEMobjpool *pop = access(path, F_OK) == 0 ? pmemobj_open(path, POBJ_LAYOUT_NAME(list))
                                                : pmemobj_create(path, POBJ_LAYOUT_NAME(list), PMEMOBJ_MIN_POOL, 0644);
    if (!pop) { perror("pool"); return 1; }
    TOID(struct root) root = POBJ_ROOT(pop, struct root);
    for (int i = 0; i < 3; i++) {
        pmemobj_mutex_lock(pop, &D_RW(root)->lock);
        TX_BEGIN(pop) {
            TOID(struct node) n = TX_NEW(struct node);
            D_RW(n)->value = D_RO(root)->count + 1;
            D_RW(n)->next = D_RO(root)->head;
            TX_ADD(root);
            D_RW(root)->head = n;
            D_RW(root)->count++;
        } TX_END
        pmemobj_mutex_unlock(pop, &D_RW(root)->lock);
    }
    printf("count %lu:", (unsigned long)D_RO(root)->count);
    for (TOID(struct node) n = D_RO(root)->head; !TOID_IS_NULL(n); n = D_RO(n)->next) printf(" %lu", (unsigned long)D_RO(n)->value);
    printf("\n");
    pmemobj_close(pop);
    return 0;
}
