#!/usr/bin/env python3
"""Writes math_cases.jsonl, the labelled corpus for reward.MathVerify.

Run from this directory:  python3 gen_math_cases.py > math_cases.jsonl

Each line is {"id", "category", "response", "gold", "expected", "note"}:
expected is the verdict a correct grader must give (true: the response's
final answer equals the gold answer), and note says why, by hand. The
verdicts follow the usual conventions of math RL graders: an answer is
judged by its value, not its spelling; decimals are exact numbers, so a
rounded decimal does not equal an irrational or repeating exact value;
sets are unordered, tuples ordered, interval ends must match in kind;
"x = 5" answers a question whose answer is 5; units, degree signs and
\\text{} decorations do not change a value.
"""
import json
import sys

B = lambda x: "The final result follows. Therefore the answer is $\\boxed{" + x + "}$."

cases = []


def add(cat, response, gold, expected, note):
    cases.append({"category": cat, "response": response, "gold": gold, "expected": expected, "note": note})


def boxed(cat, pred, gold, expected, note):
    add(cat, B(pred), gold, expected, note)


# --- extraction ---------------------------------------------------------------
add("extract", r"We get $x=3$, so \boxed{3}.", "3", True, "plain boxed")
add("extract", r"First \boxed{2} was wrong; correcting, the answer is \boxed{5}.", "5", True, "last boxed wins")
add("extract", r"First \boxed{2} was wrong; correcting, the answer is \boxed{5}.", "2", False, "an earlier boxed value is not the answer")
add("extract", r"So $\boxed{\frac{1}{\sqrt{2}}}$", r"\frac{\sqrt{2}}{2}", True, "nested braces inside boxed; 1/sqrt2 = sqrt2/2")
add("extract", r"Hence \fbox{12}.", "12", True, r"\fbox is accepted like \boxed")
add("extract", r"The roots are \boxed{2} and \boxed{3}.", "2, 3", True, "two boxes side by side form the answer list")
add("extract", r"The answer is \boxed 7.", "7", True, r"\boxed followed by a space and one token")
add("extract", r"The answer is 42.", "42", True, "'the answer is X' phrase")
add("extract", "Answer: 17", "17", True, "'Answer: X' phrase")
add("extract", "Final answer: $\\frac{3}{4}$", "0.75", True, "'Final answer:' with inline math; 3/4 = 0.75 exactly")
add("extract", "After all that work...\n**144**", "144", True, "bold final line")
add("extract", "Compute 3 + 4 = 7, then double it: 14", "14", True, "fallback: last number of the final line")
add("extract", "I think the value is $\\frac{5}{2}$", "2.5", True, "fallback: last inline math of the final line")
add("extract", "I cannot determine the value.", "3", False, "no answer at all")
add("extract", r"<think>maybe \boxed{4}</think> The answer is \boxed{6}.", "6", True, "the answer after </think> counts")
add("extract", r"<think>maybe \boxed{4}</think> The answer is \boxed{6}.", "4", False, "the draft inside <think> is not the answer")
add("extract", r"Thus \boxed{\frac{1}{2}", r"\frac12", False, "unclosed boxed: the response was truncated while writing its answer, so it has none")
add("extract", r"The answer is $\boxed{x = 4}$.", "4", True, "boxed equation answers a value")
add("extract", r"So the answer is $\boxed{\text{(B)}}$", "B", True, "multiple choice letter in \\text{(B)}")
add("extract", r"The correct option is \boxed{C}", "C", True, "multiple choice letter")
add("extract", r"The correct option is \boxed{D}", "C", False, "wrong multiple choice letter")
add("extract", "The answer is (A).", "A", True, "multiple choice letter in parentheses from a phrase")
add("extract", r"Answer: \boxed{B) 14}", "B", True, "letter followed by the option text")
add("extract", r"Thus the final answer is $\boxed{ 12 }$. I hope it is correct.", "12", True, "Minerva-style ending")

# --- integers and decimals -------------------------------------------------------
boxed("number", "5", "5", True, "identical integers")
boxed("number", "5", "6", False, "different integers")
boxed("number", "-5", "5", False, "sign matters")
boxed("number", "5.0", "5", True, "5.0 is exactly 5")
boxed("number", "05", "5", True, "leading zero")
boxed("number", "0.5", r"\frac{1}{2}", True, "0.5 is exactly 1/2")
boxed("number", "0.50", "0.5", True, "trailing zero")
boxed("number", "0.333", r"\frac{1}{3}", False, "rounded decimal is not 1/3")
boxed("number", "0.3333333333", r"\frac{1}{3}", False, "even a long rounding is not exactly 1/3")
boxed("number", "3.14", r"\pi", False, "3.14 is not pi")
boxed("number", "1.4142", r"\sqrt{2}", False, "rounded root is not sqrt2")
boxed("number", "1,000", "1000", True, "thousands separator")
boxed("number", "1,234,567", "1234567", True, "several thousands separators")
boxed("number", "1{,}000", "1000", True, "LaTeX {,} thousands separator")
boxed("number", r"1\,000", "1000", True, r"thin-space \, thousands separator")
boxed("number", "1 000 000", "10^6", True, "space as thousands separator")
boxed("number", "12,345.5", "12345.5", True, "thousands separator with decimals")
boxed("number", "1.5e3", "1500", True, "scientific notation e3")
boxed("number", r"1.5 \times 10^{3}", "1500", True, "scientific notation in LaTeX")
boxed("number", r"2.5\times10^{-2}", "0.025", True, "negative power of ten")
boxed("number", r"6.02 \times 10^{23}", r"6.02\times 10^{23}", True, "same scientific number, different spacing")
boxed("number", r"6.02 \times 10^{23}", r"6.2\times 10^{23}", False, "different mantissa")
boxed("number", ".5", "0.5", True, "decimal without a leading zero")
boxed("number", "-0", "0", True, "negative zero is zero")

# --- fractions ------------------------------------------------------------------------
boxed("fraction", r"\frac{2}{4}", r"\frac{1}{2}", True, "unreduced fraction")
boxed("fraction", r"\dfrac{3}{4}", r"\frac{3}{4}", True, r"\dfrac")
boxed("fraction", r"\tfrac34", "3/4", True, r"\tfrac with single-digit shorthand arguments")
boxed("fraction", r"\frac12", "0.5", True, r"\frac12 shorthand")
boxed("fraction", "3/4", r"\frac{3}{4}", True, "slash fraction")
boxed("fraction", "-3/4", r"-\frac{3}{4}", True, "negative slash fraction")
boxed("fraction", r"\frac{-3}{4}", r"-\frac{3}{4}", True, "sign in the numerator")
boxed("fraction", r"\frac{3}{-4}", r"-\frac{3}{4}", True, "sign in the denominator")
boxed("fraction", r"\frac{4}{3}", r"\frac{3}{4}", False, "inverted fraction")
boxed("fraction", r"3\frac{1}{2}", r"\frac{7}{2}", True, "mixed number 3 1/2 = 7/2")
boxed("fraction", r"2\frac{3}{4}", "2.75", True, "mixed number 2 3/4 = 2.75")
boxed("fraction", r"3\frac{1}{2}", r"\frac{3}{2}", False, "mixed number is not the product 3*(1/2)")
boxed("fraction", r"\frac{\frac{1}{2}}{\frac{3}{4}}", r"\frac{2}{3}", True, "nested fraction (1/2)/(3/4) = 2/3")
boxed("fraction", r"\frac{1}{2}+\frac{1}{3}", r"\frac{5}{6}", True, "sum of fractions")
boxed("fraction", r"\frac{10}{3}", "3.33", False, "rounded 10/3")
boxed("fraction", r"\frac{7}{8}", "0.875", True, "terminating decimal of 7/8")

# --- roots and radicals ------------------------------------------------------------------
boxed("radical", r"2\sqrt{2}", r"\sqrt{8}", True, "sqrt8 = 2 sqrt2")
boxed("radical", r"\sqrt{12}", r"2\sqrt{3}", True, "sqrt12 = 2 sqrt3")
boxed("radical", r"\sqrt{50}", r"5\sqrt{2}", True, "sqrt50 = 5 sqrt2")
boxed("radical", r"3\sqrt{2}", r"2\sqrt{3}", False, "3 sqrt2 != 2 sqrt3 (18 vs 12 squared)")
boxed("radical", r"\frac{\sqrt{2}}{2}", r"\frac{1}{\sqrt{2}}", True, "rationalised denominator")
boxed("radical", r"\frac{\sqrt{3}}{3}", r"\frac{1}{\sqrt3}", True, r"\sqrt3 without braces")
boxed("radical", r"\sqrt{2}+\sqrt{3}", r"\sqrt{3}+\sqrt{2}", True, "commuted sum of radicals")
boxed("radical", r"\sqrt{2}+\sqrt{3}", r"\sqrt{5}", False, "sqrt2 + sqrt3 is not sqrt5")
boxed("radical", r"\sqrt[3]{8}", "2", True, "cube root of 8")
boxed("radical", r"\sqrt[3]{-27}", "-3", True, "real cube root of a negative number")
boxed("radical", r"\sqrt[3]{16}", r"2\sqrt[3]{2}", True, "cube root of 16 = 2 cbrt2")
boxed("radical", r"\sqrt[4]{16}", "2", True, "fourth root")
boxed("radical", r"\frac{1}{\sqrt{2}+1}", r"\sqrt{2}-1", True, "1/(sqrt2+1) = sqrt2-1 (difference of squares)")
boxed("radical", r"\frac{1+\sqrt{5}}{2}", r"\frac{2}{\sqrt{5}-1}", True, "golden ratio two ways: 2/(sqrt5-1) = 2(sqrt5+1)/4")
boxed("radical", r"(\sqrt{2})^2", "2", True, "square of a root")
boxed("radical", r"\sqrt{\frac{1}{4}}", r"\frac12", True, "root of a fraction")
boxed("radical", r"8^{1/3}", "2", True, "fractional power")
boxed("radical", r"4^{-1/2}", r"\frac{1}{2}", True, "negative fractional power")
boxed("radical", r"\sqrt{2}\cdot\sqrt{6}", r"2\sqrt{3}", True, "product of roots sqrt12")
boxed("radical", "sqrt(18)", r"3\sqrt{2}", True, "plain-text sqrt()")

# --- powers, operators, implicit multiplication --------------------------------------------
boxed("power", "2^{10}", "1024", True, "power of two")
boxed("power", "2^10", "1024", True, "unbraced multi-digit exponent read whole")
boxed("power", "2**10", "1024", True, "Python power operator")
boxed("power", "3^{-2}", r"\frac19", True, "negative exponent")
boxed("power", "2^{3^2}", "512", True, "right-associative tower 2^(3^2)")
boxed("power", r"2 \cdot 3", "6", True, r"\cdot")
boxed("power", r"2 \times 3", "6", True, r"\times")
boxed("power", r"12 \div 4", "3", True, r"\div")
boxed("power", "5!", "120", True, "factorial")
boxed("power", r"\binom{5}{2}", "10", True, "binomial coefficient")
boxed("power", r"\dbinom{10}{3}", "120", True, "display binomial")
boxed("power", "10!", "3628800", True, "larger factorial")
boxed("power", "(2)(3)(4)", "24", True, "implicit multiplication of groups")
boxed("power", r"\left(\frac{1}{2}\right)^{2}", r"\frac14", True, r"\left \right delimiters")
boxed("power", r"|-7|", "7", True, "absolute value")
boxed("power", r"\lfloor 3.7 \rfloor", "3", True, "floor")
boxed("power", r"\lceil 3.2 \rceil", "4", True, "ceiling")

# --- constants, pi, e, complex ---------------------------------------------------------------
boxed("constant", r"2\pi", r"\pi \cdot 2", True, "2 pi commuted")
boxed("constant", r"\frac{\pi}{2}", r"\frac{1}{2}\pi", True, "pi/2")
boxed("constant", r"\pi r^2", r"r^2\pi", True, "symbolic with pi")
boxed("constant", r"4\pi", r"2\pi", False, "different multiples of pi")
boxed("constant", r"\frac{\pi}{6}", "0.5236", False, "rounded pi/6")
boxed("constant", "e^2", r"e \cdot e", True, "e squared")
boxed("constant", r"\sin\frac{\pi}{6}", r"\frac{1}{2}", True, "sin(pi/6) = 1/2, decided numerically")
boxed("constant", r"\cos(\pi)", "-1", True, "cos pi = -1")
boxed("constant", r"\log_2 8", "3", True, "log base 2 of 8")
boxed("constant", r"\ln(e^3)", "3", True, "ln e^3 = 3")
boxed("constant", r"\ln 2", r"\log 2", True, r"\log is the natural log, as in sympy")
boxed("constant", r"\tan\frac{\pi}{4}", "1", True, "tan(pi/4)")
boxed("constant", r"e^{i\pi}", "-1", True, "Euler's identity")
boxed("complex", "3+4i", "4i+3", True, "commuted complex number")
boxed("complex", "3-4i", "3+4i", False, "conjugate differs")
boxed("complex", "i^2", "-1", True, "i squared")
boxed("complex", r"\sqrt{-4}", "2i", True, "root of a negative number")
boxed("complex", r"\frac{1}{i}", "-i", True, "1/i = -i")
boxed("complex", "(1+i)^2", "2i", True, "(1+i)^2 = 2i")
boxed("complex", r"\frac{2+i}{1-i}", r"\frac{1}{2}+\frac{3}{2}i", True, "(2+i)(1+i)/2 = (1+3i)/2")

# --- percent, degrees, units, text ---------------------------------------------------------
boxed("units", r"50\%", "50", True, "percent sign dropped in the gold")
boxed("units", r"50\%", "0.5", True, "50% is 0.5")
boxed("units", "25", r"25\%", True, "percent sign dropped in the answer")
boxed("units", r"40\%", "0.5", False, "different percentage")
boxed("units", r"30^\circ", "30", True, "degrees")
boxed("units", r"30^{\circ}", r"30", True, "braced degree sign")
boxed("units", "45°", "45", True, "unicode degree sign")
boxed("units", r"5\text{ cm}", "5", True, r"\text unit")
boxed("units", r"12 \text{ dollars}", "12", True, r"\text unit with a space")
boxed("units", r"\$12.50", "12.5", True, "escaped dollar sign")
boxed("units", r"8\text{ cm}^2", "8", True, "squared unit")
boxed("units", "7 meters", "7", True, "plain-text unit word")
boxed("units", r"\text{Monday}", "Monday", True, "word answer")
boxed("units", r"\text{Tuesday}", "Monday", False, "different word answer")
boxed("units", r"\textbf{yes}", "Yes", True, "word answer, bold, case-insensitive")
boxed("units", r"\text{no}", r"\text{yes}", False, "yes is not no")
boxed("units", r"\text{5}", "5", True, r"a number inside \text")

# --- sets, tuples, intervals, matrices -------------------------------------------------------
boxed("set", r"\{1, 2, 3\}", r"\{3, 2, 1\}", True, "sets are unordered")
boxed("set", r"\{1, 2\}", r"\{1, 2, 3\}", False, "missing element")
boxed("set", "1, 2", r"\{2, 1\}", True, "a bare list against a set")
boxed("set", "2, 3", "3, 2", True, "bare lists of solutions are unordered")
boxed("set", r"\{\frac{1}{2}, \sqrt{4}\}", r"\{2, 0.5\}", True, "set elements compared by value")
boxed("set", r"\emptyset", r"\varnothing", True, "empty set")
boxed("set", r"x=2 \text{ or } x=3", "2, 3", True, "solutions written as equations joined by 'or'")
boxed("set", r"2 \pm \sqrt{3}", r"2+\sqrt{3}, 2-\sqrt{3}", True, "plus-minus expands to two solutions")
boxed("set", r"\pm 2", "2, -2", True, "bare plus-minus")
boxed("tuple", "(1, 2)", "(1,2)", True, "identical points")
boxed("tuple", "(2, 1)", "(1, 2)", False, "tuples are ordered")
boxed("tuple", r"\left(\frac{1}{2}, -3\right)", "(0.5, -3)", True, "tuple elements compared by value")
boxed("tuple", "(1, 2, 3)", "(1, 2)", False, "different lengths")
boxed("tuple", r"\langle 1, 2 \rangle", "(1, 2)", True, "angle-bracket vector")
boxed("interval", "[1, 2)", "[1,2)", True, "identical half-open intervals")
boxed("interval", "(1, 2]", "[1, 2]", False, "open vs closed end")
boxed("interval", r"(-\infty, 3)", r"(-\infty,3)", True, "interval to minus infinity")
boxed("interval", r"(-\infty, 3) \cup (4, \infty)", r"(4, \infty) \cup (-\infty, 3)", True, "union of intervals is unordered")
boxed("interval", r"(-\infty, 3] \cup (4, \infty)", r"(-\infty, 3) \cup (4, \infty)", False, "closed end at 3")
boxed("interval", "x > 3", r"(3, \infty)", True, "inequality as an interval")
boxed("interval", r"1 \le x < 5", "[1, 5)", True, "double inequality as an interval")
boxed("interval", r"[0, \frac{1}{2}]", "[0, 0.5]", True, "interval ends compared by value")
boxed("interval", r"\mathbb{R}", r"(-\infty, \infty)", True, "the reals")
boxed("matrix", r"\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}", r"\begin{bmatrix} 1 & 2 \\ 3 & 4 \end{bmatrix}", True, "pmatrix vs bmatrix")
boxed("matrix", r"\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}", r"\begin{pmatrix} 1 & 3 \\ 2 & 4 \end{pmatrix}", False, "transposed matrix")
boxed("matrix", r"\begin{pmatrix} \frac{1}{2} \\ 1 \end{pmatrix}", r"\begin{pmatrix} 0.5 \\ 1 \end{pmatrix}", True, "column vector by value")
boxed("matrix", r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}", "(1, 2)", True, "column vector against a tuple")

# --- equations and inequalities -----------------------------------------------------------------
boxed("relation", "x = 5", "5", True, "assignment answers a value")
boxed("relation", "5", "x=5", True, "value answers an assignment")
boxed("relation", "y = 5", "x = 5", False, "different variable assigned")
boxed("relation", "y = 2x + 1", "2x + 1 = y", True, "mirrored equation")
boxed("relation", "y = 2x + 1", "y = x + 2", False, "different line")
boxed("relation", "x^2 + y^2 = 1", "y^2 + x^2 = 1", True, "commuted equation of the circle")
boxed("relation", "x < 3", "3 > x", True, "mirrored inequality")
boxed("relation", r"x \geq 2", r"x \le 2", False, "opposite inequality")
boxed("relation", r"x \ne 0", r"x \neq 0", True, r"\ne and \neq")
boxed("relation", "a = b = 7", "7", True, "chained equality ends in the value")
boxed("relation", r"k \approx 2.5", "2.5", True, r"\approx answers like =")

# --- polynomials and symbolic ----------------------------------------------------------------------
boxed("symbolic", "(x+1)^2", "x^2+2x+1", True, "expanded square")
boxed("symbolic", "x^2-1", "(x-1)(x+1)", True, "difference of squares")
boxed("symbolic", "x^2+1", "(x+1)^2", False, "missing middle term")
boxed("symbolic", r"\frac{x^2-1}{x-1}", "x+1", True, "rational function that simplifies")
boxed("symbolic", "2ab", "2ba", True, "commuted product")
boxed("symbolic", r"\frac{a}{b} + \frac{c}{d}", r"\frac{ad+bc}{bd}", True, "sum of symbolic fractions")
boxed("symbolic", r"\frac{1}{x} + \frac{1}{y}", r"\frac{x+y}{xy}", True, "common denominator")
boxed("symbolic", r"\sin^2 x + \cos^2 x", "1", True, "Pythagorean identity, decided numerically")
boxed("symbolic", r"2\sin x \cos x", r"\sin(2x)", True, "double-angle identity")
boxed("symbolic", r"e^{x}e^{y}", r"e^{x+y}", True, "exponent law")
boxed("symbolic", "x^2 - 4", "(x-2)(x+2)", True, "factored difference of squares")
boxed("symbolic", "x_1 + x_2", "x_2 + x_1", True, "subscripted variables")
boxed("symbolic", "n(n+1)/2", r"\frac{n^2+n}{2}", True, "triangular numbers")
boxed("symbolic", "3x", "x3", True, "implicit product either order")
boxed("symbolic", "x^3", "3x", False, "power is not product")

# --- large and pathological ---------------------------------------------------------------------
boxed("large", "2^{100}", "1267650600228229401496703205376", True, "exact big integer")
boxed("large", "2^{100}", "1267650600228229401496703205377", False, "big integers differing by one")
boxed("large", "100!", r"100!", True, "same factorial")
boxed("large", "20!", "2432902008176640000", True, "20! exactly")
boxed("large", r"\binom{100}{50}", "100891344545564193334812497256", True, "big binomial exactly")
boxed("large", "10^{10^{10^{10}}}", "1", False, "a tower far beyond exact arithmetic is not 1; must return promptly")
boxed("large", "1000!", "1000!", True, "1000! computed exactly (8530 bits)")
boxed("large", "1000!", "999!", False, "1000! is not 999!")

assert len(cases) >= 150, len(cases)
for i, c in enumerate(cases):
    c = {"id": i, **c}
    sys.stdout.write(json.dumps(c, ensure_ascii=False) + "\n")
