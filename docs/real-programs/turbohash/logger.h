// turbo47: a stand-in for TurboHash's src/util/logger.h. turbo_hash_pmem_pmdk.h uses only its
// ERROR macro (once, when the pool cannot be created); the original also opens "log.log" in the
// working directory at static initialisation, which a driver run under ferrite need not do.
#pragma once
#include <cstdio>
#define ERROR(M, ...) fprintf(stderr, "[ERROR] " M "\n", ##__VA_ARGS__)
