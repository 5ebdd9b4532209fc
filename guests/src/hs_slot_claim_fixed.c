/* hs_slot_claim_fixed: FIXED twin of hs_slot_claim.c (claims, records, scans and releases under
 * a registry mutex, each persisted before the unlock); the same source, built with FIXED. */
#define FIXED 1
#include "hs_slot_claim.c"
