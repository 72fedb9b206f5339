package reward

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestMathVerifyAdversarial holds realistic answer styles of math RL data
// sets (MATH, AIME, AMC, GSM8K, Minerva) that a checker easily misjudges.
// Each verdict is what a careful human grader says; the comment gives the
// reason. Cases marked "fixed" were misjudged before the review that added
// them.
func TestMathVerifyAdversarial(t *testing.T) {
	cases := []struct {
		resp, gold string
		want       bool
	}{
		// Forms of one number.
		{`\boxed{\dfrac{1}{2}}`, `0.5`, true},                       // 1/2 = 0.5 exactly
		{`\boxed{0.5}`, `\frac12`, true},                            // \frac12 is 1/2
		{`\boxed{\frac 12}`, `0.5`, true},                           // spaced \frac 12
		{`\boxed{.5}`, `0.5`, true},                                 // no leading zero
		{`\boxed{2.00}`, `2`, true},                                 // trailing zeros
		{`\boxed{-0}`, `0`, true},                                   // −0 = 0
		{`\boxed{2^{10}}`, `1024`, true},                            // 2^10 = 1024
		{`\boxed{2 \times 10^3}`, `2000`, true},                     // scientific form
		{`\boxed{2e3}`, `2000`, true},                               // e-notation
		{`\boxed{1{,}000}`, `1000`, true},                           // LaTeX thousands separator
		{`\boxed{1\,000}`, `1000`, true},                            // thin-space separator
		{`\boxed{1000}`, `1{,}000`, true},                           // separator in the gold
		{`\boxed{1,2}`, `12`, false},                                // a list, not twelve
		{`\boxed{−5}`, `-5`, true},                                  // Unicode minus U+2212
		{`\boxed{−5}`, `5`, false},                                  // the sign matters
		{`\boxed{\frac{\sqrt{3}}{2}}`, `\frac{1}{2}\sqrt{3}`, true}, // same radical
		{`\boxed{1/\sqrt{2}}`, `\frac{\sqrt{2}}{2}`, true},          // rationalised
		{`\boxed{\sqrt[3]{8}}`, `2`, true},                          // exact cube root
		{`\boxed{\pi/4}`, `\frac{\pi}{4}`, true},                    // π/4 either way
		{`\boxed{e^{i\pi}}`, `-1`, true},                            // Euler's identity
		{`\boxed{3+4i}`, `4i+3`, true},                              // complex, reordered
		{`\boxed{1\frac{1}{2}}`, `\frac32`, true},                   // mixed number
		{`\boxed{3/2}`, `1\frac12`, true},                           // fixed: mixed number without braces
		{`\boxed{2\frac12}`, `1`, false},                            // fixed: was read as 2·½ = 1
		{`\boxed{0.\overline{3}}`, `\frac{1}{3}`, true},             // fixed: repeating decimal
		{`\boxed{0.1\overline{6}}`, `\frac16`, true},                // fixed: 0.1666… = 1/6
		{`\boxed{2.\overline{09}}`, `\frac{23}{11}`, true},          // fixed: 2.0909… = 23/11
		{`\boxed{0.\overline{3}}`, `0.3333`, false},                 // 1/3 is not 0.3333
		{`\boxed{\frac{1}{3}}`, `0.3333`, false},                    // rounded decimal, exact gold
		{`\boxed{0.3333}`, `\frac{1}{3}`, false},                    // and the other way round
		{`\boxed{\frac{7}{3}}`, `2.33`, false},                      // rounding is not equality
		{`\boxed{\sqrt{2}}`, `1.414`, false},                        // nor for radicals
		{`\boxed{3.14}`, `\pi`, false},                              // nor for π
		{`\boxed{0.333...}`, `\frac{1}{3}`, false},                  // dots are not \overline
		// Percent, degrees, currency, units.
		{`\boxed{10\%}`, `10`, true},                 // percent sign dropped
		{`\boxed{10\%}`, `0.1`, true},                // or read as a fraction
		{`\boxed{0.5}`, `50\%`, true},                // gold in percent
		{`\boxed{45^\circ}`, `45`, true},             // degrees sign dropped
		{`\boxed{45°}`, `45`, true},                  // Unicode degree sign
		{`\boxed{30^\circ}`, `\frac{\pi}{6}`, false}, // a bare answer keeps its number
		{`\boxed{\tan 45^\circ}`, `1`, true},         // fixed: degrees inside a trig function
		{`\boxed{\sin 30^\circ}`, `\frac12`, true},   // fixed
		{`\boxed{\cos(60^{\circ})}`, `0.5`, true},    // fixed
		{`\boxed{\sin 30}`, `\frac12`, false},        // without the sign, 30 radians
		{`\boxed{\$18.90}`, `18.90`, true},           // escaped dollar
		{`\boxed{\$1,000}`, `1000`, true},            // dollar and separator
		{`\boxed{5}`, `\$5.00`, true},                // dollar in the gold
		{`\boxed{3\text{ cm}}`, `3`, true},           // unit in \text
		{`\boxed{3\mbox{ cm}}`, `3`, true},           // unit in \mbox
		{`\boxed{3 cm}`, `3`, true},                  // plain unit
		{`\boxed{12\text{ units}^2}`, `12`, true},    // squared unit
		{`\boxed{12 \mathrm{~cm}^2}`, `12`, true},    // fixed: unit in \mathrm{~cm}
		{`\boxed{5\mathrm{kg}}`, `5`, true},          // fixed: \mathrm unit after a number
		{`\boxed{\mathrm{e}^2}`, `e^2`, true},        // one-letter \mathrm stays maths
		{`\boxed{\text{5 apples}}`, `5`, true},       // fixed: number and unit inside \text
		{`\boxed{\text{3 hours}}`, `3`, true},        // fixed
		{`\boxed{\text{5 apples}}`, `6`, false},      // the number still counts
		{`\boxed{100\text{ km/h}}`, `100`, true},     // compound unit
		{`\boxed{3}`, `3 \text{ cm}`, true},          // unit in the gold
		{`\boxed{6 square feet}`, `6`, true},         // plain two-word unit
		{`\boxed{2 pi}`, `2`, false},                 // fixed: "pi" is no unit, 2π ≠ 2
		{"The answer is 2 pi.", `2`, false},          // fixed: same in a phrase
		{`\boxed{4 pi}`, `4\pi`, true},               // plain-text π
		{`\boxed{\log_{10} 100}`, `2`, true},         // explicit base
		{`\boxed{\frac{22}{7}}`, `\pi`, false},       // an approximation of π
		// Equations, functions, named values.
		{`\boxed{x=3}`, `3`, true},                                 // assignment answers the value
		{`\boxed{3}`, `x=3`, true},                                 // and the other way round
		{`\boxed{f(x) = x^2}`, `x^2`, true},                        // fixed: f(x) = … names the value
		{`\boxed{f(2) = 5}`, `5`, true},                            // fixed
		{`\boxed{f(x) = x^2}`, `x^3`, false},                       // the value still counts
		{`\boxed{xy = 6}`, `6`, false},                             // a product is not a name
		{`\boxed{2x = 6}`, `6`, false},                             // x = 3, not 6
		{`\boxed{y = 2x + 1}`, `2x+1`, true},                       // line given as y = …
		{`\boxed{x^2+2x+1}`, `(x+1)^2`, true},                      // polynomial identity
		{`\boxed{x^2+2x+2}`, `(x+1)^2`, false},                     // off by one
		{`\boxed{\frac{x^2-1}{x-1}}`, `x+1`, true},                 // rational function
		{`\boxed{\sqrt{x^2}}`, `x`, false},                         // |x|, not x
		{`\boxed{a=2, b=3}`, `2, 3`, true},                         // named values in order
		{`\boxed{a=3, b=2}`, `2, 3`, false},                        // fixed: swapped named values
		{`\boxed{b=3, a=2}`, `a=2, b=3`, true},                     // names match, any order
		{`\boxed{a=3, b=2}`, `a=2, b=3`, false},                    // names bind the values
		{`\boxed{3, 2}`, `a=2, b=3`, false},                        // fixed: bare list against named gold
		{`\boxed{x=3, x=2}`, `2, 3`, true},                         // roots: unordered
		{`\boxed{x=6 \text{ or } x=7}`, `6, 7`, true},              // roots joined by "or"
		{`\boxed{x = \pm 2}`, `-2, 2`, true},                       // ± expands
		{`\boxed{1 \pm \sqrt{2}}`, `1+\sqrt{2}, 1-\sqrt{2}`, true}, // ± with a radical
		// Tuples, sets, intervals.
		{`\boxed{(1,2)}`, `(1, 2)`, true},                                            // spacing
		{`\boxed{(2,1)}`, `(1, 2)`, false},                                           // tuples are ordered
		{`\boxed{\{1,2\}}`, `{2,1}`, true},                                           // sets are not
		{`\boxed{6,7}`, `\{6, 7\}`, true},                                            // a bare list against a set
		{`\boxed{[0,1)}`, `[0, 1)`, true},                                            // half-open interval
		{`\boxed{[0,1)}`, `(0,1]`, false},                                            // the other half-open one
		{`\boxed{[0,1)}`, `[0,1]`, false},                                            // closed is different
		{`\boxed{0 \le x < 1}`, `[0,1)`, true},                                       // inequality as interval
		{`\boxed{x \geq 3}`, `(3, \infty)`, false},                                   // closed at 3
		{`\boxed{\infty}`, `\infty`, true},                                           // infinity
		{`\boxed{\infty}`, `-\infty`, false},                                         // sign of infinity
		{`\boxed{-\infty, 3}`, `(-\infty, 3)`, true},                                 // interval without brackets
		{`\boxed{(-\infty, 3]}`, `(-\infty, 3)`, false},                              // closed end differs
		{`\boxed{(2, \infty) \cup (-\infty, 1)}`, `(-\infty,1)\cup(2,\infty)`, true}, // unions are unordered
		{`\boxed{x < 1 \text{ or } x > 2}`, `(-\infty,1)\cup(2,\infty)`, true},       // fixed: "or" of inequalities
		{`\boxed{x \le 1 \text{ or } x > 2}`, `(-\infty,1)\cup(2,\infty)`, false},    // closed end differs
		{`\boxed{x < 1, y > 2}`, `(-\infty,1)\cup(2,\infty)`, false},                 // two variables: no union
		{`\boxed{\begin{pmatrix} 1 \\ 2 \end{pmatrix}}`, `(1,2)`, true},              // column vector as tuple
		{`\boxed{\emptyset}`, `\varnothing`, true},                                   // empty set spellings
		{`\boxed{\mathbb{R}}`, `(-\infty, \infty)`, true},                            // the real line
		// Multiple choice.
		{`\boxed{\text{(B)}}`, `B`, true},                    // letter in \text
		{`\boxed{(B) 12}`, `B`, true},                        // letter with its value
		{`\boxed{C}`, `D`, false},                            // another letter
		{`\boxed{\textbf{(A)}\ 8}`, `8`, true},               // fixed: AMC label and value, gold value
		{`\boxed{\textbf{(A)}\ 8}`, `9`, false},              // the value still counts
		{`\boxed{8}`, `\textbf{(A) }8`, true},                // fixed: AMC gold with label, answer value
		{`\boxed{A}`, `\textbf{(A) }8`, true},                // fixed: answer letter
		{`\boxed{B}`, `\textbf{(A) }8`, false},               // wrong letter
		{`\boxed{\textbf{(B)}\ 8}`, `\textbf{(A) }8`, false}, // labels decide when both have one
		{`\boxed{\text{(C) } \frac{1}{2}}`, `\frac12`, true}, // fixed: label before a fraction
		// Words.
		{`\boxed{\text{Monday}}`, `Monday`, true},                  // word answer
		{`\boxed{\text{Tuesday}}`, `Monday`, false},                // another word
		{`\boxed{\text{No solution}}`, `\text{no solution}`, true}, // case of words
		// Extraction: where the answer is.
		{`\boxed{3} then \boxed{5}`, `5`, true},                                                   // last box wins
		{`\boxed{3} then more thoughts and \boxed{5}`, `3`, false},                                // an earlier box is a draft
		{`<think>\boxed{3}</think>The answer is \boxed{5}`, `5`, true},                            // after </think>
		{`<think>\boxed{3}</think>The answer is \boxed{5}`, `3`, false},                           // the draft in <think> is not it
		{`<think>wait \boxed{5}</think>So 5.`, `5`, true},                                         // final text without a box
		{`The answer is $\boxed{1}$ and $\boxed{2}$`, `1,2`, true},                                // boxes side by side
		{`\boxed{72} but let me double-check: 70+2=72, yes.`, `72`, true},                         // text after the box
		{`\boxed{72.}`, `72`, true},                                                               // period inside the box
		{`$\boxed{18}$ cookies`, `18`, true},                                                      // unit after the box
		{"The final answer is $\\boxed{5}$. I hope it is correct.", `5`, true},                    // Minerva
		{"Final Answer: The final answer is $\\frac{3}{4}$. I hope it is correct.", `0.75`, true}, // Minerva, no box
		{"Final Answer: The final answer is 5. I hope it is correct.", `5`, true},                 // Minerva, bare
		{`The answer is 72.`, `72`, true},                                                         // sentence period
		{`The answer is $72.`, `72`, true},                                                        // dollar as currency
		{"#### 72", `72`, true},                                                                   // GSM8K style response
		{"**Answer:** 18", `18`, true},                                                            // fixed: bold label closes before the value
		{"**Answer: 18**", `18`, true},                                                            // fixed: bold around label and value
		{"**Final Answer**\n18", `18`, true},                                                      // bold heading, value below
		// Gold formats.
		{`\boxed{72}`, "#### 72", true},                                            // fixed: raw GSM8K answer field
		{`\boxed{1234}`, "She sold 48/2 = <<48/2=24>>24 clips.\n#### 1,234", true}, // fixed: full GSM8K solution as gold
		{`\boxed{71}`, "#### 72", false},                                           // the value still counts
		{`\boxed{\$5}`, `5`, true},                                                 // \$ in the answer
	}
	for _, c := range cases {
		out := MathVerify(context.Background(), c.resp, c.gold)
		assert.Equal(t, c.want, out.Acc, "response %q, gold %q: %s", c.resp, c.gold, out.Reason)
		assert.NotEmpty(t, out.Reason)
		assert.NotContains(t, out.Reason, "(,", "every verdict names its method")
	}
}
