#!/usr/bin/env python3
"""Reference timing and accuracy of a sympy-based checker on math_cases.jsonl.

This is NOT Math-Verify (huggingface/Math-Verify could not be installed where
this was written: no PyPI access, and its latex2sympy2_extended dependency's
generated ANTLR parser was not available). It is the pipeline Math-Verify is
built on — an ANTLR LaTeX parser into sympy, then sympy equality and
simplify() — so its cost per check is a lower bound on Math-Verify's:

    answer = last \\boxed{...} of the response (balanced braces)
    a, b   = sympy.parsing.latex.parse_latex(answer), parse_latex(gold)
    equal  = a == b  or  simplify(a - b) == 0

Each check runs under a 5 s SIGALRM timeout, as Math-Verify's does.

Run:  python3 bench_sympy.py math_cases.jsonl
with a Python whose sympy can import its LaTeX parser (sympy >= 1.12 and
antlr4-python3-runtime 4.11; with another 4.x runtime, set
SYMPY_ANTLR_ANY=1 to skip sympy's version check — the 4.11 generated parser
loads on 4.13). Prints accuracy against the labels and checks per second
(CPU time, single thread).
"""
import json
import os
import signal
import sys
import time

import sympy
import sympy.parsing.latex._parse_latex_antlr as pla

if os.environ.get("SYMPY_ANTLR_ANY"):
    pla.version = lambda _name: "4.11"
from sympy.parsing.latex import parse_latex


class Timeout(Exception):
    pass


def on_alarm(signum, frame):
    raise Timeout()


def last_boxed(s):
    i = s.rfind("\\boxed")
    while i >= 0:
        j = i + len("\\boxed")
        if j < len(s) and s[j] == "{":
            depth = 0
            for k in range(j, len(s)):
                if s[k] == "{":
                    depth += 1
                elif s[k] == "}":
                    depth -= 1
                    if depth == 0:
                        return s[j + 1 : k]
        i = s.rfind("\\boxed", 0, i)
    return None


def check(response, gold):
    ans = last_boxed(response)
    if ans is None:
        return False
    a = parse_latex(ans)
    b = parse_latex(gold)
    if a == b:
        return True
    return sympy.simplify(a - b) == 0


def main(path):
    cases = [json.loads(l) for l in open(path)]
    signal.signal(signal.SIGALRM, on_alarm)
    right = timeouts = errors = 0
    start = time.process_time()
    for c in cases:
        signal.alarm(5)
        try:
            got = bool(check(c["response"], c["gold"]))
        except Timeout:
            got, timeouts = False, timeouts + 1
        except Exception:
            got, errors = False, errors + 1
        finally:
            signal.alarm(0)
        right += got == c["expected"]
    elapsed = time.process_time() - start
    n = len(cases)
    print(f"cases {n}  agree {right} ({100.0 * right / n:.1f}%)  timeouts {timeouts}  errors {errors}")
    print(f"cpu {elapsed:.2f}s  checks/s {n / elapsed:.1f}")


if __name__ == "__main__":
    main(sys.argv[1])
