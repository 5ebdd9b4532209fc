/* pmdk_pmem2: libpmem2 (dynamically linked): maps a file with pmem2_config_new,
 * pmem2_source_from_fd and pmem2_map_new, then stores through the map's own functions:
 * strcpy + the persist function from pmem2_get_persist_fn, and the memcpy function from
 * pmem2_get_memcpy_fn. Prints the contents; on stderr the map's store granularity (under ferrite:
 * `cache-line` with --persistency adr, as MAP_SYNC succeeds on the PM mount, `byte` with eadr,
 * as the region's persistence_domain says cpu_cache; natively it depends on the file system).
 * Creates the file (4 KiB) if it does not exist. Exits 0 (1 with a message if a call fails). */
#include <fcntl.h>
#include <libpmem2.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int fail(const char *what)
{
    fprintf(stderr, "%s: %s\n", what, pmem2_errormsg());
    return 1;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/pmem0/pmem2file";
    int fd = open(path, O_RDWR | O_CREAT, 0644);
    if (fd < 0 || ftruncate(fd, 4096) != 0) {
        perror(path);
        return 1;
    }
    struct pmem2_config *cfg;
    struct pmem2_source *src;
    struct pmem2_map *map;
    if (pmem2_config_new(&cfg))
        return fail("pmem2_config_new");
    if (pmem2_source_from_fd(&src, fd))
        return fail("pmem2_source_from_fd");
    if (pmem2_config_set_required_store_granularity(cfg, PMEM2_GRANULARITY_PAGE))
        return fail("pmem2_config_set_required_store_granularity");
    if (pmem2_map_new(&map, cfg, src))
        return fail("pmem2_map_new");

    char *addr = pmem2_map_get_address(map);
    size_t size = pmem2_map_get_size(map);
    pmem2_persist_fn persist = pmem2_get_persist_fn(map);
    pmem2_memcpy_fn copy = pmem2_get_memcpy_fn(map);
    strcpy(addr, "hello, libpmem2");
    persist(addr, 64);
    copy(addr + 64, "copied", 7, 0);
    printf("mapped %zu bytes: %s / %s\n", size, addr, addr + 64);
    static const char *const names[] = {"byte", "cache-line", "page"};
    enum pmem2_granularity g = pmem2_map_get_store_granularity(map);
    fprintf(stderr, "granularity %s\n", g <= PMEM2_GRANULARITY_PAGE ? names[g] : "?");

    pmem2_map_delete(&map);
    pmem2_source_delete(&src);
    pmem2_config_delete(&cfg);
    close(fd);
    return 0;
}
