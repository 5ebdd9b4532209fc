/* ext_crc_ring_fixed: FIXED twin of ext_crc_ring.c (recovery verifies each record's checksum and
 * stops at the first bad one); the same source, built with FIXED. */
#define FIXED 1
#include "ext_crc_ring.c"
