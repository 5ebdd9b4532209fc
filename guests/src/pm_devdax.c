/* pm_devdax: maps a device-DAX namespace (/dev/dax0.0; under ferrite the file dax0.0 in
 * --pm-dir) and persists a value. Prints it; exits 0, or 2 if the device is missing. */
#include "pm.h"

int main(void)
{
    int fd = open("/dev/dax0.0", O_RDWR);
    if (fd < 0) {
        perror("/dev/dax0.0");
        return 2;
    }
    uint64_t *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    p[0] = 0xda;
    persist(p, 8);
    printf("devdax value %llx\n", (unsigned long long)p[0]);
    return 0;
}
