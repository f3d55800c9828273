#!/usr/bin/env python3
"""Counts the kernel's workqueue names (kernel_names.txt) that the headers
provide, by compiling a use of each against them:

    kernel_names.py [-I DIR]...          the "have" names, in one program:
                                         fails unless each one compiles
    kernel_names.py --each [-I DIR]...   every name alone: how many compile
                                         (to count another header's)

Prints the count of the non-constant names (types, functions and macros,
system queues) and of the constants, and the names left out with why.
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CC = os.environ.get("CC", "gcc")


def names():
    out = []
    with open(os.path.join(HERE, "kernel_names.txt")) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            name, kind, status, *why = line.split()
            out.append((name, kind, status, " ".join(why)))
    return out


def use(name, kind):
    """A statement that compiles only if the headers provide `name`."""
    return {
        "struct": f"(void)sizeof(struct {name});",
        "type": f"(void)sizeof({name});",
        "enum": f"(void)sizeof(enum {name});",
        # Any pointer to it must come from a declaration of the library.
        "opaque": f"{{ struct {name} *p = cmwq_system_wq(0); (void)p; }}",
        "func": f"\n#ifndef {name}\n(void)&{name};\n#endif\n",
        "queue": f"(void)({name});",
        "const": f"(void)(long)({name});",
    }[kind]


def program(entries):
    body = "\n".join(use(n, k) for n, k, *_ in entries)
    return (
        "#include <linux/kernel.h>\n#include <linux/workqueue.h>\n"
        "int main(void)\n{\n" + body + "\nreturn 0;\n}\n"
    )


def compiles(src, flags):
    with tempfile.TemporaryDirectory() as d:
        c = os.path.join(d, "names.c")
        with open(c, "w") as f:
            f.write(src)
        r = subprocess.run(
            [CC, "-fsyntax-only", "-Werror=implicit-function-declaration", *flags, c],
            capture_output=True,
            text=True,
        )
        return r.returncode == 0, r.stderr


def main():
    args = sys.argv[1:]
    each = "--each" in args
    flags = [a for a in args if a != "--each"]
    all_names = names()
    if each:
        have = [e for e in all_names if compiles(program([e]), flags)[0]]
    else:
        have = [e for e in all_names if e[2] == "have"]
        ok, err = compiles(program(have), flags)
        if not ok:
            print(err)
            sys.exit("FAILED: a name kernel_names.txt says the headers have does not compile")
    consts = [e for e in all_names if e[1] == "const"]
    rest = [e for e in all_names if e[1] != "const"]
    n_rest = sum(1 for e in have if e[1] != "const")
    n_const = sum(1 for e in have if e[1] == "const")
    print(f"  kernel names: {n_rest} of {len(rest)} (types, functions and macros, system queues),"
          f" {n_const} of {len(consts)} constants")
    if not each:
        for n, _, status, why in all_names:
            if status != "have":
                print(f"    out: {n}: {why}")
        if n_rest < 90:
            sys.exit(f"FAILED: {n_rest} kernel names, fewer than 90")


main()
