package mathexpr

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// Verdict is the outcome of comparing two answers.
type Verdict struct {
	// Equal reports that the answers are equivalent.
	Equal bool
	// Method names the rule that decided: "exact", "numeric", "text",
	// "structure" (identical trees that could not be evaluated).
	Method string
	// Note explains an undecided or degraded comparison, e.g. that a value
	// was too large for exact arithmetic; empty otherwise.
	Note string
}

// Equivalent parses gold and pred and reports whether they denote the same
// answer. It returns an error only when ctx ends or the step budget runs
// out; unparseable input is a Verdict with a Note.
func Equivalent(ctx context.Context, gold, pred string) (Verdict, error) {
	if err := ctx.Err(); err != nil {
		return Verdict{}, err
	}
	gw, pw := wordAnswer(gold), wordAnswer(pred)
	if gw != "" || pw != "" {
		if gw == pw || normText(gold) == normText(pred) {
			return Verdict{Equal: true, Method: "text"}, nil
		}
		if gw != "" && pw != "" {
			return Verdict{Method: "text"}, nil
		}
	}
	g, errG := Parse(gold)
	p, errP := Parse(pred)
	if errG != nil || errP != nil {
		if normText(gold) == normText(pred) && normText(gold) != "" {
			return Verdict{Equal: true, Method: "text"}, nil
		}
		if errG != nil {
			return Verdict{Method: "text", Note: fmt.Sprintf("gold does not parse: %v", errG)}, nil
		}
		return Verdict{Method: "text", Note: fmt.Sprintf("answer does not parse: %v", errP)}, nil
	}
	return Compare(ctx, g, p)
}

// Compare reports whether the trees gold and pred are equivalent.
func Compare(ctx context.Context, gold, pred *Node) (Verdict, error) {
	c := &comparer{bud: &budget{ctx: ctx}}
	eq, err := c.eq(gold, pred, 0)
	if errors.Is(err, ErrBudget) && gold.String() == pred.String() {
		// Identical trees are the same answer, however costly to
		// evaluate: (x+y+z+w+1)^{60} must not exhaust the budget
		// against itself.
		return Verdict{Equal: true, Method: "structure", Note: "identical; too costly to evaluate"}, nil
	}
	if err != nil {
		return Verdict{}, err
	}
	if c.method == "" {
		c.method = "structure" // decided by the shapes alone: a relation against a value
	}
	v := Verdict{Equal: eq, Method: c.method}
	if c.tooLarge {
		v.Note = "a value was too large for exact arithmetic"
	}
	return v, nil
}

type comparer struct {
	bud      *budget
	method   string
	tooLarge bool
}

func isColl(n *Node) bool {
	switch n.Kind {
	case KList, KSet, KTuple, KInterval, KUnion, KMatrix:
		return true
	}
	return false
}

// expand turns a ± b into the set {a + b, a − b}, and x = a ± b into a
// set of two equations.
func expand(n *Node) *Node {
	switch n.Kind {
	case KPM:
		a, b := n.Args[0], n.Args[1]
		return &Node{Kind: KSet, Args: []*Node{
			{Kind: KAdd, Args: []*Node{a, b}},
			{Kind: KAdd, Args: []*Node{a, {Kind: KNeg, Args: []*Node{b}}}},
		}}
	case KRel:
		last := n.Args[len(n.Args)-1]
		if last.Kind == KPM && isAssign(n) {
			set := expand(last)
			out := &Node{Kind: KSet}
			for _, v := range set.Args {
				args := append(append([]*Node(nil), n.Args[:len(n.Args)-1]...), v)
				out.Args = append(out.Args, &Node{Kind: KRel, Args: args, Ops: n.Ops})
			}
			return out
		}
	}
	return n
}

// isAssign reports a relation that assigns a value to a variable: only "="
// (and "∈") and a variable first or just before the value: x = 5,
// x = y = 5, k = 2 + 3 = 5, 1 = z = 0. "7 = 11a + c" is an equation, not
// an assignment, and does not answer "11a + c".
func isAssign(n *Node) bool {
	for _, op := range n.Ops {
		if op != "=" && op != "in" {
			return false
		}
	}
	return isVariable(n.Args[0]) || isVariable(n.Args[len(n.Args)-2]) || isFuncCall(n.Args[0])
}

// funcLetters are the letters that name functions in answers: f(x) = x^2.
var funcLetters = map[string]bool{"f": true, "g": true, "h": true, "p": true, "q": true, "P": true, "Q": true}

// isFuncCall reports f(x), g(2): the parser reads them as products, but on
// the left of "=" they name the value on the right.
func isFuncCall(v *Node) bool {
	return v.Kind == KMul && len(v.Args) == 2 && v.Args[0].Kind == KSym && funcLetters[v.Args[0].Name] &&
		(v.Args[1].Kind == KSym || v.Args[1].Kind == KNum)
}

// assignmentList reports a list of assignments to two or more distinct
// variables, "a = 2, b = 3": its order carries meaning.
func assignmentList(n *Node) bool {
	if n.Kind != KList || len(n.Args) < 2 {
		return false
	}
	seen := map[string]bool{}
	for _, a := range n.Args {
		if a.Kind != KRel || len(a.Ops) != 1 || a.Ops[0] != "=" || !isVariable(a.Args[0]) || seen[a.Args[0].Name] {
			return false
		}
		seen[a.Args[0].Name] = true
	}
	return true
}

// hasRel reports whether any element of a list is a relation.
func hasRel(n *Node) bool {
	for _, a := range n.Args {
		if a.Kind == KRel {
			return true
		}
	}
	return false
}

// relUnion reads a list of inequalities in one variable, "x < 1 or x > 2",
// as the union of their intervals; nil when n is not one.
func relUnion(n *Node) *Node {
	if n.Kind != KList || len(n.Args) < 2 {
		return nil
	}
	u := &Node{Kind: KUnion}
	name := ""
	for _, a := range n.Args {
		if a.Kind != KRel {
			return nil
		}
		iv := relToInterval(a)
		if iv == nil {
			return nil
		}
		v := a.Args[0]
		if !isVariable(v) {
			v = a.Args[len(a.Args)/2]
		}
		if name != "" && v.Name != name {
			return nil
		}
		name = v.Name
		u.Args = append(u.Args, iv)
	}
	return u
}

func isVariable(v *Node) bool {
	return v.Kind == KSym && v.Name != "pi" && v.Name != "e" && v.Name != "i"
}

func (c *comparer) eq(g, p *Node, depth int) (bool, error) {
	if depth > maxDepth {
		return false, ErrTooDeep
	}
	if err := c.bud.spend(1); err != nil {
		return false, err
	}
	g, p = expand(g), expand(p)
	if u := relUnion(g); u != nil {
		g = u
	}
	if u := relUnion(p); u != nil {
		p = u
	}
	switch {
	case g.Kind == KRel && p.Kind == KRel:
		if ok, err := c.rel(g, p, depth); ok || err != nil {
			return ok, err
		}
		if iv := relToInterval(p); iv != nil {
			if giv := relToInterval(g); giv != nil {
				return c.eq(giv, iv, depth+1)
			}
		}
		return false, nil
	case p.Kind == KRel:
		if isAssign(p) {
			return c.eq(g, p.Args[len(p.Args)-1], depth+1)
		}
		if iv := relToInterval(p); iv != nil && intervalLike(g) {
			return c.eq(g, iv, depth+1)
		}
		return false, nil
	case g.Kind == KRel:
		if isAssign(g) {
			return c.eq(g.Args[len(g.Args)-1], p, depth+1)
		}
		if iv := relToInterval(g); iv != nil && intervalLike(p) {
			return c.eq(iv, p, depth+1)
		}
		return false, nil
	case g.Kind == KText || p.Kind == KText:
		c.method = "text"
		return normText(g.String()) == normText(p.String()), nil
	}
	if !isColl(g) && !isColl(p) {
		return c.scalarPct(g, p)
	}
	c.method = "structure"
	switch g.Kind {
	case KSet:
		switch p.Kind {
		case KSet, KList, KTuple:
			return c.unordered(g.Args, p.Args, depth)
		}
		if len(g.Args) == 1 {
			return c.eq(g.Args[0], p, depth+1)
		}
	case KList:
		switch p.Kind {
		case KSet, KList:
			// "a = 3, b = 2" does not answer "2, 3": named values keep
			// their order against a bare list (a list of roots
			// "x = 3, x = 2" does not name distinct variables).
			if p.Kind == KList && assignmentList(p) != assignmentList(g) && !(hasRel(g) && hasRel(p)) {
				return c.ordered(g.Args, p.Args, depth)
			}
			return c.unordered(g.Args, p.Args, depth)
		case KTuple:
			return c.ordered(g.Args, p.Args, depth)
		}
	case KTuple:
		switch p.Kind {
		case KTuple, KList:
			return c.ordered(g.Args, p.Args, depth)
		case KInterval:
			if len(g.Args) == 2 && p.LOpen && p.ROpen {
				return c.ordered(g.Args, p.Args, depth)
			}
		case KMatrix:
			if p.Rows == 1 || p.Cols == 1 {
				return c.ordered(g.Args, p.Args, depth)
			}
		}
	case KInterval:
		switch p.Kind {
		case KInterval:
			if g.LOpen != p.LOpen || g.ROpen != p.ROpen {
				return false, nil
			}
			return c.ordered(g.Args, p.Args, depth)
		case KTuple:
			if len(p.Args) == 2 && g.LOpen && g.ROpen {
				return c.ordered(g.Args, p.Args, depth)
			}
		case KUnion:
			if len(p.Args) == 1 {
				return c.eq(g, p.Args[0], depth+1)
			}
		}
	case KUnion:
		switch p.Kind {
		case KUnion:
			return c.unordered(g.Args, p.Args, depth)
		}
		if len(g.Args) == 1 {
			return c.eq(g.Args[0], p, depth+1)
		}
	case KMatrix:
		switch p.Kind {
		case KMatrix:
			if g.Rows != p.Rows || g.Cols != p.Cols {
				return false, nil
			}
			return c.ordered(g.Args, p.Args, depth)
		case KTuple, KList:
			if g.Rows == 1 || g.Cols == 1 {
				return c.ordered(g.Args, p.Args, depth)
			}
		}
	default:
		// A scalar gold against a one-element collection.
		switch p.Kind {
		case KSet, KList, KTuple:
			if len(p.Args) == 1 {
				return c.eq(g, p.Args[0], depth+1)
			}
		}
	}
	return false, nil
}

func (c *comparer) ordered(gs, ps []*Node, depth int) (bool, error) {
	if len(gs) != len(ps) {
		return false, nil
	}
	for i := range gs {
		ok, err := c.eq(gs[i], ps[i], depth+1)
		if err != nil || !ok {
			return false, err
		}
	}
	c.method = "structure"
	return true, nil
}

// unordered matches every gold element to a distinct equivalent predicted
// element. Equivalence is transitive, so a greedy match is complete.
func (c *comparer) unordered(gs, ps []*Node, depth int) (bool, error) {
	if len(gs) != len(ps) {
		return false, nil
	}
	used := make([]bool, len(ps))
	for _, g := range gs {
		found := false
		for j, p := range ps {
			if used[j] {
				continue
			}
			ok, err := c.eq(g, p, depth+1)
			if err != nil {
				return false, err
			}
			if ok {
				used[j], found = true, true
				break
			}
		}
		if !found {
			return false, nil
		}
	}
	c.method = "structure"
	return true, nil
}

// rel compares two relations: the same operators (after turning > into <)
// and the same differences lhs − rhs; an equation may also be mirrored.
func (c *comparer) rel(g, p *Node, depth int) (bool, error) {
	g, p = collapse(orient(g)), collapse(orient(p))
	if len(g.Ops) != len(p.Ops) {
		return false, nil
	}
	for i := range g.Ops {
		if g.Ops[i] != p.Ops[i] {
			return false, nil
		}
	}
	if len(g.Ops) > 1 {
		return c.ordered(g.Args, p.Args, depth)
	}
	if ok, err := c.ordered(g.Args, p.Args, depth); ok || err != nil {
		return ok, err
	}
	if isColl(g.Args[0]) || isColl(g.Args[1]) || isColl(p.Args[0]) || isColl(p.Args[1]) {
		return false, nil
	}
	dg := &Node{Kind: KAdd, Args: []*Node{g.Args[0], {Kind: KNeg, Args: []*Node{g.Args[1]}}}}
	dp := &Node{Kind: KAdd, Args: []*Node{p.Args[0], {Kind: KNeg, Args: []*Node{p.Args[1]}}}}
	switch g.Ops[0] {
	case "=", "!=":
		if ok, err := c.scalar(dg, dp); ok || err != nil {
			return ok, err
		}
		return c.scaled(dg, dp, false)
	case "<", "<=":
		if ok, err := c.scalar(dg, dp); ok || err != nil {
			return ok, err
		}
		return c.scaled(dg, dp, true)
	}
	return false, nil
}

// collapse reduces a chain of equalities to its ends: "x = 5+5+1 = 11"
// states x = 11.
func collapse(n *Node) *Node {
	if len(n.Args) <= 2 {
		return n
	}
	for _, op := range n.Ops {
		if op != "=" {
			return n
		}
	}
	return &Node{Kind: KRel, Args: []*Node{n.Args[0], n.Args[len(n.Args)-1]}, Ops: []string{"="}}
}

// scaled reports dg = c·dp for a non-zero constant c (positive when
// positive is set): 2x + 4y − 3 = 0 is the line y = −x/2 + 3/4.
func (c *comparer) scaled(dg, dp *Node, positive bool) (bool, error) {
	env := &exactEnv{bud: c.bud}
	f, err := env.eval(dg, 0)
	if err != nil {
		return false, budgetOnly(err)
	}
	g, err := env.eval(dp, 0)
	if err != nil {
		return false, budgetOnly(err)
	}
	a, err := f.n.mul(g.d, c.bud)
	if err != nil {
		return false, budgetOnly(err)
	}
	b, err := g.n.mul(f.d, c.bud)
	if err != nil {
		return false, budgetOnly(err)
	}
	if a.isZero() || b.isZero() {
		return false, nil
	}
	var ratio *big.Rat
	for k, t := range b {
		at, ok := a[k]
		if !ok {
			return false, nil
		}
		ratio = new(big.Rat).Quo(at.c, t.c)
		break
	}
	if positive && ratio.Sign() <= 0 {
		return false, nil
	}
	diff, err := a.add(b.scale(ratio), -1)
	if err != nil {
		return false, budgetOnly(err)
	}
	if diff.isZero() {
		c.method = "exact"
		return true, nil
	}
	return false, nil
}

// budgetOnly keeps the errors that must stop a comparison (deadline,
// budget) and drops the ones that only mean "cannot decide this way".
func budgetOnly(err error) error {
	if isBudget(err) {
		return err
	}
	return nil
}

// orient rewrites a chain of > and >= as the mirrored chain of < and <=.
func orient(n *Node) *Node {
	for _, op := range n.Ops {
		if op != ">" && op != ">=" {
			return n
		}
	}
	out := &Node{Kind: KRel}
	for i := len(n.Args) - 1; i >= 0; i-- {
		out.Args = append(out.Args, n.Args[i])
	}
	for i := len(n.Ops) - 1; i >= 0; i-- {
		out.Ops = append(out.Ops, map[string]string{">": "<", ">=": "<="}[n.Ops[i]])
	}
	return out
}

// intervalLike reports intervals, unions and (a, b) pairs.
func intervalLike(n *Node) bool {
	return n.Kind == KInterval || n.Kind == KUnion || (n.Kind == KTuple && len(n.Args) == 2)
}

// relToInterval reads x > a, x ≤ b and a < x < b as intervals of x.
func relToInterval(n *Node) *Node {
	n = orient(n)
	inf := &Node{Kind: KInf}
	ninf := &Node{Kind: KNeg, Args: []*Node{inf}}
	isVar := func(v *Node) bool { return v.Kind == KSym && v.Name != "pi" && v.Name != "e" && v.Name != "i" }
	for _, op := range n.Ops {
		if op != "<" && op != "<=" {
			return nil
		}
	}
	switch len(n.Ops) {
	case 1:
		if isVar(n.Args[0]) {
			return &Node{Kind: KInterval, Args: []*Node{ninf, n.Args[1]}, LOpen: true, ROpen: n.Ops[0] == "<"}
		}
		if isVar(n.Args[1]) {
			return &Node{Kind: KInterval, Args: []*Node{n.Args[0], inf}, LOpen: n.Ops[0] == "<", ROpen: true}
		}
	case 2:
		if isVar(n.Args[1]) {
			return &Node{Kind: KInterval, Args: []*Node{n.Args[0], n.Args[2]}, LOpen: n.Ops[0] == "<", ROpen: n.Ops[1] == "<"}
		}
	}
	return nil
}

// scalarPct compares scalars, also accepting "50%" for 50 (answers often
// drop or add the percent sign).
func (c *comparer) scalarPct(g, p *Node) (bool, error) {
	ok, err := c.scalar(g, p)
	if ok || err != nil {
		return ok, err
	}
	if g.Kind == KPercent {
		if ok, err := c.scalar(g.Args[0], p); ok || err != nil {
			return ok, err
		}
	}
	if p.Kind == KPercent {
		return c.scalar(g, p.Args[0])
	}
	return false, nil
}

func (c *comparer) scalar(g, p *Node) (bool, error) {
	env := &exactEnv{bud: c.bud}
	fg, errG := env.eval(g, 0)
	if isBudget(errG) {
		return false, errG
	}
	fp, errP := env.eval(p, 0)
	if isBudget(errP) {
		return false, errP
	}
	risk := false
	if errG == nil && errP == nil {
		eq, decided, err := equalFn(fg, fp, c.bud)
		if isBudget(err) {
			return false, err
		}
		if err == nil && (eq || decided) {
			c.method = "exact"
			return eq, nil
		}
		if errors.Is(err, ErrTooLarge) {
			c.tooLarge, risk = true, true
		}
	}
	if errors.Is(errG, ErrTooLarge) || errors.Is(errP, ErrTooLarge) {
		c.tooLarge, risk = true, true
	}
	eq, decided, err := numericEqual(g, p, c.bud, risk)
	if err != nil {
		return false, err
	}
	if decided {
		c.method = "numeric"
		return eq, nil
	}
	c.method = "structure"
	return g.String() == p.String(), nil
}

// normText lowercases and strips spacing, braces, dollar signs, \text and
// trailing punctuation, for comparing answers that are words.
func normText(s string) string {
	s = strings.ToLower(s)
	for _, cut := range []string{`\textbf`, `\mathrm`, `\mbox`, `\text`, "{", "}", "$", " ", `\`, "\t", "\n"} {
		s = strings.ReplaceAll(s, cut, "")
	}
	return strings.TrimRight(s, ".")
}

var mathWords = map[string]bool{"pi": true, "oo": true, "inf": true, "infinity": true, "infty": true, "sqrt": true, "e": true, "i": true}

// wordAnswer returns the normalised text of an answer that is a word or
// phrase ("Monday", "\text{yes}"), or "" for anything else: such answers
// compare as text, because as mathematics "yes" would be the product y·e·s.
func wordAnswer(s string) string {
	bare := s
	for _, cut := range []string{`\textbf`, `\mathrm`, `\mbox`, `\text`} {
		bare = strings.ReplaceAll(bare, cut, "")
	}
	if strings.Contains(bare, `\`) {
		return "" // \emptyset, \pi: commands are mathematics
	}
	t := normText(s)
	if len(t) < 2 || mathWords[t] {
		return ""
	}
	for i := 0; i < len(t); i++ {
		if !isLetter(t[i]) {
			return ""
		}
	}
	// Function applications like "sinx" are mathematics.
	for _, f := range funcWords {
		if strings.HasPrefix(t, f) && len(t) <= len(f)+2 {
			return ""
		}
	}
	// Two or three letters may well be a product of symbols (xy, abc).
	if len(t) <= 3 && !strings.Contains(s, `\text`) {
		return ""
	}
	return t
}
