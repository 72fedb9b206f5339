#!/usr/bin/env python3
"""gen_pyliteral_cases.py: golden results of CPython's int(), float() and
ast.literal_eval() followed by json.dumps(v, ensure_ascii=False), the
primitives vLLM's qwen3_coder tool parser converts parameter values with
(_convert_param_value). rollout/pyliteral.go must agree with them.

Run from this folder with CPython 3.11: python3 gen_pyliteral_cases.py
It writes pyliteral_cases.json: a list of {"in", "int", "float", "literal"}
where "int" and "literal" are the JSON text json.dumps writes (null when
Python raises, or when the text is not strict JSON, e.g. Infinity), and
"float" is repr(float(s)) or null. A result that is not strict JSON
(NaN, Infinity) or cannot be encoded as UTF-8 (a lone surrogate) is null.
"""
import ast
import json
import sys

INPUTS = [
    # integers as int() reads them
    "42", " 42 ", "\t-7\n", "+3", "007", "1_000", "1__000", "_1", "1_", "0", "-0",
    "12345678901234567890123456789", "4.0", "1e3", "0x10", "", " ", "٣", "1 2", "--1",
    "\x1c5\x1f", "\u00a042\u2003",
    # floats as float() reads them
    "3.14", "-2.5e-3", "1e-05", "0.0001", "1e16", "1e+16", "123456789012345678", "1.5e300",
    "1e999", "-1e999", "inf", "-Infinity", "NaN", "nan", "+inf", "1.", ".5", ".", "1e", "1e+",
    "1_0.5", "1_0.5_1", "1._5", "0.1", "1/3", "0x1p-2", "infinity", "1.0", "-0.0", "1e-7",
    "2.5", "10.25", "9007199254740993", "1e22", "1.7976931348623157e308", "5e-324",
    # Python literals
    "'a'", '"b"', "'''x\ny'''", '"""q"""', "'a' 'b'", "'a' \"b\"", "r'\\n'", "u'x'", "b'x'",
    "f'x'", "rb'x'", "'\\n\\t\\\\'", "'\\x41\\u00e9\\U0001F600'", "'\\101'", "'\\777'",
    "'\\q'", "'\\N{BULLET}'", "'\\ud800'", "'caf\u00e9'", "'a\nb'", "'a\\\nb'",
    "'\"quoted\"'", "'\\x4'", "r'\\''", "R\"x\\\"y\"", "'\x01'",
    "True", "False", "None", "true", "null", "none", "-True", "+1", "-1", "- 1", "--1", "-(1)",
    "-(-1)", "(1)", "(1,)", "()", "(1, 2)", "1, 2", "1,", "[1, 2,]", "[]", "[,]", "[1,,2]",
    "{}", "{'a': 1}", "{'a': 1,}", "{'a': 1, 'a': 2, 'b': 3}", "{1: 'x', True: 'y'}",
    "{1.5: 2}", "{None: 1}", "{(1, 2): 3}", "{[1]: 2}", "{1, 2}", "set()", "{'k': {'n': [1, (2, 3)]}}",
    "[1, 'two', 3.0, None, True]", "{\"key\": \"value\"}", "{'key': 'value'}",
    "[1e999]", "{1e999: 1}", "1j", "1+2j", "1+2", "0x1F", "0o17", "0b101", "0x_1f", "0b2",
    "01", "00", "0_0", "1_000_000", "1.5e3", "1E3", ".5e1", "5.", "1__0", "1e5j", "1if",
    "x", "print(1)", "[1, 2", "'unterminated", "", "  [1]", "\n[1]", "\n  [1]", "[1]\n",
    "[1]  # comment", "# only", "[1,\n 2]", "1,\n2", "1\n2", "{'a':\n 1}", "'a'\n'b'",
    "('a'\n'b')", "[-1.5, +2, -0]", "[-0.0]", "{'x': -1e-7}", "1.0e16", "123.456",
    "['\\x00']", "'\x7f\u2028'", "\"\"", "''", "[[[]]]", "{'a': [{'b': None}]}",
    "99999999999999999999999999999999999", "-0x10", "Ellipsis", "...", "'a' b'b'",
    "\"multi\nline\"", "'''a\\\nb'''", "(1)(2)", "[1][0]", "{'a':1}['a']",
]


def jsonish(f, s):
    try:
        v = f(s)
    except Exception:
        return None
    try:
        out = json.dumps(v, ensure_ascii=False)
        json.loads(out, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
        out.encode("utf-8")  # a lone surrogate cannot be sent
        return out
    except Exception:
        return None


def float_repr(s):
    try:
        return repr(float(s))
    except Exception:
        return None


cases = []
for s in INPUTS:
    cases.append({
        "in": s,
        "int": jsonish(int, s),
        "float": float_repr(s),
        "literal": jsonish(ast.literal_eval, s),
    })

with open("pyliteral_cases.json", "w", encoding="utf-8") as f:
    json.dump({"python": sys.version.split()[0], "cases": cases}, f, ensure_ascii=False, indent=1)
    f.write("\n")
