#!/bin/bash
# Runs every guest natively twice (stdout to a pipe, in a scratch directory)
# and checks the exit status against the documented one and that stdout,
# stderr and status are identical between the two runs.  `make -C guests check`.
set -u
B=$(cd "$(dirname "$0")/../build" && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/ferrite-guests.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T"
fail=0
run() { # expected-status name binary args...
    local want=$1 name=$2; shift 2
    for i in 1 2; do
        "$@" </dev/null 2>"err$i" | cat >"out$i"
        echo "${PIPESTATUS[0]}" >"rc$i"
    done
    local rc det=yes
    rc=$(cat rc1)
    cmp -s out1 out2 && cmp -s err1 err2 && cmp -s rc1 rc2 || det=NO
    local ok=ok
    [ "$rc" = "$want" ] && [ $det = yes ] || { ok=FAIL; fail=1; }
    printf '%-4s %-28s status %3s (want %3s) deterministic %s\n' $ok "$name" "$rc" "$want" $det
}
run_nd() { # like run, for guests whose output is schedule-dependent by design: status only
    local want=$1 name=$2; shift 2
    local rc ok=ok
    "$@" </dev/null 2>err1 | cat >out1
    rc=${PIPESTATUS[0]}
    [ "$rc" = "$want" ] || { ok=FAIL; fail=1; }
    printf '%-4s %-28s status %3s (want %3s) output by design nondeterministic: %s\n' $ok "$name" "$rc" "$want" "$(head -n1 out1)"
}
run 3   libc_workout        $B/libc_workout a "b c"
run 3   libc_workout.pie    $B/libc_workout.pie a "b c"
run 0   cxx_exceptions      $B/cxx_exceptions
run 0   cxx_exceptions.pie  $B/cxx_exceptions.pie
run 0   setjmp_longjmp      $B/setjmp_longjmp
run 0   setjmp_longjmp.pie  $B/setjmp_longjmp.pie
run 139 null_deref          $B/null_deref
run 134 assert_fail         $B/assert_fail
run 0   cpu_bound           $B/cpu_bound 0.1
run 7   exit_status         $B/exit_status
run 42  "exit_status 42"    $B/exit_status 42
run 5   exit_group_direct   $B/exit_group_direct
run 136 div_zero            $B/div_zero
run 0   "div_zero x"        $B/div_zero x
run 0   write_stderr        $B/write_stderr
run 0   thr_mutex           $B/thr_mutex
run 0   thr_condvar         $B/thr_condvar
run 0   thr_rwlock          $B/thr_rwlock
run 0   thr_barrier         $B/thr_barrier
run 0   thr_spin_sem        $B/thr_spin_sem
run 0   thr_once_tls        $B/thr_once_tls
run 0   thr_detached        $B/thr_detached
run 0   thr_futex           $B/thr_futex
run 139 thr_crash           $B/thr_crash
run 0   sig_alarm           $B/sig_alarm
run_nd 0 thr_racy_counter   $B/thr_racy_counter
run_nd 0 thr_dekker         $B/thr_dekker
# thr_deadlock and sig_timer_blocked (like endless_loop) never end natively and are not run here.
if grep -qw clwb /proc/cpuinfo && grep -qw clflushopt /proc/cpuinfo; then
    run 0 pm_log              $B/pm_log "$T/pool.log"
    run 0 "pm_log check"      $B/pm_log "$T/pool.log" check
    run 0 pm_log.pie          $B/pm_log.pie "$T/pool.logpie"
    run 0 pm_log_fixed        $B/pm_log_fixed "$T/pool.logfixed"
    run 0 "pm_log_fixed check" $B/pm_log_fixed "$T/pool.logfixed" check
    run 2 "pm_log check (no pool)" $B/pm_log "$T/no-such-pool" check
    run 0 pm_insns            $B/pm_insns "$T/pool.insns"
    run 0 pm_unflushed_fence  $B/pm_unflushed_fence "$T/pool.unfenced"
    run 0 pm_redundant_flush  $B/pm_redundant_flush "$T/pool.redundant"
else
    echo "skip PM guests: CPU lacks clwb/clflushopt"
fi
exit $fail
