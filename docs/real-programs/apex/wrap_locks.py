#!/usr/bin/env python3
"""HawkSet-exp's approach for APEX (config/apex.cfg names apex_trylock_wrapper,
apex_read_trylock_wrapper, apex_release_wrapper, apex_read_release_wrapper; the artifact's
patches/apex.diff that adds them is not stored): route APEX's lock operations through wrapper
functions whose first argument is the lock word, so that a lock configuration can name them.
Each edit replaces the CAS, the reader-count decrement or the release store on its own line,
so the published line numbers (bugs.py: apex_nodes.h 962, 2915, 2933, 3479, 3480, 3606, 3798)
stay. Usage: wrap_locks.py SRC_DIR (APEX's src/, at c49a217), in place; append the wrappers
printed with --wrappers to util/utils.h."""
import sys
WRAPPERS = r'''
// HawkSet-exp's approach for APEX: the lock operations go through wrapper functions a lock
// configuration can name. Each takes the lock word's address as its first argument; a
// try-lock returns true when it took the lock.
extern "C" {
__attribute__((noinline)) bool apex_trylock_wrapper(void *lock, void *expected, uint32_t desired) {
  return __atomic_compare_exchange_n((uint32_t *)lock, (uint32_t *)expected, desired, false, __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE);
}
__attribute__((noinline)) bool apex_read_trylock_wrapper(void *lock, void *expected, uint32_t desired) {
  return __atomic_compare_exchange_n((uint32_t *)lock, (uint32_t *)expected, desired, false, __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE);
}
__attribute__((noinline)) void apex_release_wrapper(void *lock, uint32_t value) {
  __atomic_store_n((uint32_t *)lock, value, __ATOMIC_RELEASE);
}
__attribute__((noinline)) void apex_read_release_wrapper(void *lock) {
  __atomic_sub_fetch((uint32_t *)lock, 1, __ATOMIC_ACQUIRE);
}
}
'''
if '--wrappers' in sys.argv:
    print(WRAPPERS)
    sys.exit(0)
T, R = 'apex_trylock_wrapper', 'apex_read_trylock_wrapper'
EDITS = {
    'core/apex_nodes.h': [
        (156, 'CAS(&lock_,', T + '(&lock_,'),  # AlexModelNode::get_write_lock
        (182, 'CAS(&lock_,', T + '(&lock_,'),  # promote_from_read_to_write
        (192, 'SUB(&lock_, 1);', 'apex_read_release_wrapper(&lock_);'),
        (206, 'CAS(&lock_,', T + '(&lock_,'),  # try_get_write_lock
        (230, 'CAS(&lock_,', R + '(&lock_,'),  # get_read_lock
        (246, 'CAS(&lock_,', R + '(&lock_,'),  # try_get_read_lock
        (250, 'SUB(&lock_, 1);', 'apex_read_release_wrapper(&lock_);'),  # release_read_lock
        (260, '__atomic_store_n(&lock_, 0, __ATOMIC_RELEASE);', 'apex_release_wrapper(&lock_, 0);'),
        (766, 'CAS(&lock_,', T + '(&lock_,'),  # AlexDataNode::get_lock (node, SMO)
        (776, 'CAS(&lock_,', T + '(&lock_,'),  # try_get_lock
        (781, '__atomic_store_n(&lock_, v + 1 - lockSet, __ATOMIC_RELEASE);', 'apex_release_wrapper(&lock_, v + 1 - lockSet);'),
        (796, 'CAS(&link_lock_,', T + '(&link_lock_,'),
        (805, 'CAS(&link_lock_,', T + '(&link_lock_,'),
        (810, '__atomic_store_n(&link_lock_, v & lockMask, __ATOMIC_RELEASE);', 'apex_release_wrapper(&link_lock_, v & lockMask);'),
        (849, 'CAS(&scale_parameters_[lock_pos].lock_,', T + '(&scale_parameters_[lock_pos].lock_,'),  # partition lock
        (859, 'CAS(&scale_parameters_[lock_pos].lock_,', T + '(&scale_parameters_[lock_pos].lock_,'),
        (864, '__atomic_store_n(&scale_parameters_[lock_pos].lock_, v + 1 - lockSet, __ATOMIC_RELEASE);',
         'apex_release_wrapper(&scale_parameters_[lock_pos].lock_, v + 1 - lockSet);'),
    ],
    'core/apex.h': [
        (319, 'CAS(&root_lock_,', T + '(&root_lock_,'),
        (329, 'CAS(&root_lock_,', T + '(&root_lock_,'),
        (334, '__atomic_store_n(&root_lock_, v + 1 - lockSet, __ATOMIC_RELEASE);', 'apex_release_wrapper(&root_lock_, v + 1 - lockSet);'),
    ],
}
src = sys.argv[1]
for path, edits in EDITS.items():
    lines = open(f'{src}/{path}').read().split('\n')
    for n, old, new in edits:
        assert old in lines[n - 1], (path, n, lines[n - 1])
        lines[n - 1] = lines[n - 1].replace(old, new)
    open(f'{src}/{path}', 'w').write('\n'.join(lines))
