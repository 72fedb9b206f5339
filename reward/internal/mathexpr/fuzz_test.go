package mathexpr

import (
	"context"
	"testing"
	"time"
)

// FuzzParse: the parser never panics; a parsed tree renders, and comparing
// it with itself terminates under a short deadline.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`\frac{1}{2}`, `2\sqrt{2}`, `x^{2}+1`, `(1,2]`, `\{1,2\}`, `\begin{pmatrix}1&2\\3&4\end{pmatrix}`,
		`3\frac{1}{2}`, `50\%`, `30^\circ`, `5\text{ cm}`, `1,000`, `1.5e3`, `e^{i\pi}`, `\sin^2 x`,
		`\log_2 8`, `|x|`, `\lfloor x\rfloor`, `x \in [0,1)`, `a<b\le c`, `2 \pm 3`, `\binom{5}{2}`,
		`10^{10^{10}}`, `1000!`, `\sqrt[3]{-8}`, `\mathbb{R}`, `\langle1,2\rangle`, `-\infty`, `\left(x\right)`,
		`0.\overline{3}`, `1\frac12`, `12\mathrm{~cm}^2`, `\sin 30^\circ`, `\text{5 apples}`, `f(x)=x^2`,
		`a=2, b=3`, `x<1 \text{ or } x>2`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Parse(s)
		if err != nil {
			return
		}
		_ = n.String()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		_, _ = Compare(ctx, n, n)
		if el := time.Since(start); el > 3*time.Second {
			t.Fatalf("Compare took %v on %q", el, s)
		}
	})
}
