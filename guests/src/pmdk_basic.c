/* pmdk_basic: libpmem (dynamically linked): pmem_map_file on the PM mount, pmem_persist,
 * pmem_memcpy_persist. Prints the contents; is_pmem on stderr (1 under ferrite: MAP_SYNC works
 * on its PM mount) and pmem_has_auto_flush (libpmem's eADR detection, from the NVDIMM regions'
 * persistence_domain in /sys: 1 under ferrite --persistency eadr, else 0). Exits 0. */
#include <libpmem.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/pmemfile";
    size_t len; int is_pmem;
    char *p = pmem_map_file(path, 4096, PMEM_FILE_CREATE, 0644, &len, &is_pmem);
    if (!p) { perror("pmem_map_file"); return 1; }
    strcpy(p, "hello, persistent memory");
    pmem_persist(p, 64);
    pmem_memcpy_persist(p + 64, "copied", 7);
    printf("mapped %zu bytes: %s / %s\n", len, p, p + 64);
    fprintf(stderr, "is_pmem %d auto_flush %d\n", is_pmem, pmem_has_auto_flush());
    pmem_unmap(p, len);
    return 0;
}
