#!/usr/bin/env python3
"""Run every guest natively under strace and print a Markdown summary of the
system calls it makes (used to produce guests/SYSCALLS.md).

Usage: python3 guests/tools/strace_summary.py > /tmp/syscalls.md
Needs strace (apt-get install -y strace) and a built guests/build/.
Guest stdout goes to a pipe (as in the test-suite), stdin is /dev/null.
"""
import collections
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.join(os.path.dirname(HERE), "build")

# name, argv tail ("{pool}" is replaced by a scratch pool path), timeout
RUNS = [
    ("exit_status", [], None),
    ("exit_group_direct", [], None),
    ("write_stderr", [], None),
    ("null_deref", [], None),
    ("assert_fail", [], None),
    ("div_zero", [], None),
    ("endless_loop", [], 1),
    ("setjmp_longjmp", [], None),
    ("setjmp_longjmp.pie", [], None),
    ("cxx_exceptions", [], None),
    ("cxx_exceptions.pie", [], None),
    ("cpu_bound", ["0.05"], None),
    ("libc_workout", ["arg1"], None),
    ("libc_workout.pie", ["arg1"], None),
    ("pm_log", ["{pool}"], None),
    ("pm_log check", ["{pool}", "check"], None),
    ("pm_log.pie", ["{pool}"], None),
    ("pm_log_fixed", ["{pool}"], None),
    ("pm_insns", ["{pool}"], None),
    ("pm_unflushed_fence", ["{pool}"], None),
    ("pm_redundant_flush", ["{pool}"], None),
]

LINE = re.compile(r"^(?:\d+\s+)?([a-z_0-9]+)\((.*)$")


def trace(name, args, timeout, tmp):
    binary = os.path.join(BUILD, name.split()[0])
    pool = os.path.join(tmp, "pool." + name.split()[0].replace(".pie", ""))
    args = [a.replace("{pool}", pool) for a in args]
    out = os.path.join(tmp, name.replace(" ", "_") + ".trace")
    cmd = ["strace", "-f", "-X", "raw", "-o", out, "-E", "FERRITE_TEST=x", binary] + args
    # Own session so a hung guest (endless_loop) and its strace can be killed
    # together as one process group without touching anything else.
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, cwd=tmp, start_new_session=True)
    try:
        p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        p.communicate()
    calls = []
    ending = ""
    with open(out) as f:
        for raw in f:
            raw = re.sub(r"^\d+\s+", "", raw.rstrip("\n"))
            if raw.startswith("+++"):
                ending = raw.strip("+ ")
                continue
            if raw.startswith("---"):
                continue
            m = LINE.match(raw)
            if m:
                calls.append((m.group(1), raw))
    return calls, ending.strip()


def main():
    tmp = tempfile.mkdtemp(prefix="ferrite-strace-")
    results = {}
    for name, args, timeout in RUNS:
        results[name] = trace(name, args, timeout, tmp)

    print("| guest | syscalls (count) in first-use order, excluding execve | ending |")
    print("|---|---|---|")
    for name, _, _ in RUNS:
        calls, ending = results[name]
        counts = collections.OrderedDict()
        for c, _ in calls:
            if c == "execve":
                continue
            counts[c] = counts.get(c, 0) + 1
        s = ", ".join(f"{c}" + (f"×{n}" if n > 1 else "") for c, n in counts.items())
        ending = ending or "(killed by the tool)"
        print(f"| {name} | {s} | {ending} |")


if __name__ == "__main__":
    main()
