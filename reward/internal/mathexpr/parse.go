package mathexpr

import (
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"
)

// Parse reads a LaTeX or plain-text answer into an expression tree. It
// returns an error wrapping ErrSyntax, ErrEmpty, ErrTooLong or ErrTooDeep
// for input it cannot read; it never panics.
func Parse(s string) (*Node, error) {
	return parseDepth(s, 0)
}

func parseDepth(s string, depth int) (*Node, error) {
	toks, err := lex(s)
	if err != nil {
		return nil, err
	}
	if len(toks) == 1 {
		return nil, ErrEmpty
	}
	p := &parser{toks: toks, depth: depth}
	n, err := p.parseSeq(func(t token) bool { return t.typ == tEOF })
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.typ != tEOF {
		return nil, fmt.Errorf("%w: unexpected %q at byte %d", ErrSyntax, t.text, t.pos)
	}
	return n, nil
}

type parser struct {
	toks     []token
	p        int
	depth    int
	absDepth int
	// degs counts the degree signs read so far, so that a trigonometric
	// function can tell that its argument was in degrees: \tan 45^\circ.
	degs int
}

func (p *parser) peek() token { return p.toks[p.p] }

func (p *parser) peekAt(k int) token {
	if p.p+k < len(p.toks) {
		return p.toks[p.p+k]
	}
	return p.toks[len(p.toks)-1]
}

func (p *parser) next() token {
	t := p.toks[p.p]
	if t.typ != tEOF {
		p.p++
	}
	return t
}

func (p *parser) isOp(text string) bool {
	t := p.peek()
	return t.typ == tOp && t.text == text
}

func (p *parser) expectOp(text string) error {
	t := p.next()
	if t.typ != tOp || t.text != text {
		if t.typ == tEOF {
			return fmt.Errorf("%w: missing %q at end of input", ErrSyntax, text)
		}
		return fmt.Errorf("%w: expected %q, found %q at byte %d", ErrSyntax, text, t.text, t.pos)
	}
	return nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return fmt.Errorf("%w: more than %d levels at byte %d", ErrTooDeep, maxDepth, p.peek().pos)
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

func isSeparator(t token) bool {
	return t.typ == tOp && (t.text == "," || t.text == ";" || t.text == `\\`)
}

// parseSeq reads comma-separated items until stop matches; one item is
// returned as is, several as a KList.
func (p *parser) parseSeq(stop func(token) bool) (*Node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	var items []*Node
	for {
		for p.isOp("&") {
			p.next()
		}
		if stop(p.peek()) || p.peek().typ == tEOF {
			break
		}
		if isSeparator(p.peek()) {
			p.next()
			continue
		}
		it, err := p.parseRel()
		if err != nil {
			return nil, err
		}
		items = append(items, it)
		for p.isOp("&") {
			p.next()
		}
		if !isSeparator(p.peek()) {
			break
		}
		p.next()
	}
	switch len(items) {
	case 0:
		return nil, fmt.Errorf("%w at byte %d", ErrEmpty, p.peek().pos)
	case 1:
		return items[0], nil
	}
	return &Node{Kind: KList, Args: items}, nil
}

var relOps = map[string]bool{"=": true, "<": true, "<=": true, ">": true, ">=": true, "!=": true, "in": true, "~": true}

func (p *parser) parseRel() (*Node, error) {
	first, err := p.parseUnion()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); !(t.typ == tOp && relOps[t.text]) {
		return first, nil
	}
	rel := &Node{Kind: KRel, Args: []*Node{first}}
	for {
		t := p.peek()
		if !(t.typ == tOp && relOps[t.text]) {
			break
		}
		p.next()
		for p.isOp("&") {
			p.next()
		}
		rhs, err := p.parseUnion()
		if err != nil {
			return nil, err
		}
		rel.Ops = append(rel.Ops, t.text)
		rel.Args = append(rel.Args, rhs)
	}
	return dropApprox(rel), nil
}

// dropApprox reads ≈: "x ≈ 11" is an answer like "x = 11", but in
// "x = 1/3 ≈ 0.33" the approximation after the exact value is dropped.
func dropApprox(rel *Node) *Node {
	if rel.Ops[0] == "~" {
		for i, op := range rel.Ops {
			if op == "~" {
				rel.Ops[i] = "="
			}
		}
		return rel
	}
	for i, op := range rel.Ops {
		if op == "~" {
			rel.Ops = rel.Ops[:i]
			rel.Args = rel.Args[:i+1]
			break
		}
	}
	return rel
}

func (p *parser) parseUnion() (*Node, error) {
	first, err := p.parseSum()
	if err != nil {
		return nil, err
	}
	if !p.isOp("cup") {
		return first, nil
	}
	u := &Node{Kind: KUnion, Args: []*Node{first}}
	for p.isOp("cup") {
		p.next()
		n, err := p.parseSum()
		if err != nil {
			return nil, err
		}
		u.Args = append(u.Args, n)
	}
	return u, nil
}

func (p *parser) parseSum() (*Node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	first, err := p.parseTerm()
	if err != nil {
		return nil, err
	}
	terms := []*Node{first}
	var pm *Node
	for {
		t := p.peek()
		if t.typ != tOp || (t.text != "+" && t.text != "-" && t.text != "pm" && t.text != "mp") {
			break
		}
		p.next()
		n, err := p.parseTerm()
		if err != nil {
			return nil, err
		}
		switch t.text {
		case "+":
			terms = append(terms, n)
		case "-":
			terms = append(terms, &Node{Kind: KNeg, Args: []*Node{n}})
		case "pm", "mp":
			if pm != nil {
				return nil, fmt.Errorf("%w: more than one ± at byte %d", ErrSyntax, t.pos)
			}
			if t.text == "mp" {
				n = &Node{Kind: KNeg, Args: []*Node{n}}
			}
			pm = n
		}
	}
	var sum *Node
	if len(terms) == 1 {
		sum = terms[0]
	} else {
		sum = &Node{Kind: KAdd, Args: terms}
	}
	if pm != nil {
		return bin(KPM, sum, pm), nil
	}
	return sum, nil
}

// startsPrimary reports whether t can begin an implicit factor: "2x", "3\pi", "x(y+1)".
func (p *parser) startsPrimary(t token) bool {
	switch t.typ {
	case tNum, tIdent:
		return true
	case tCmd:
		return !strings.HasPrefix(t.text, "end:")
	case tOp:
		switch t.text {
		case "(", "{", `\{`, "lfloor", "lceil", "<<":
			return true
		case "|":
			return p.absDepth == 0
		}
	}
	return false
}

func (p *parser) parseTerm() (*Node, error) {
	cur, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		switch {
		case t.typ == tOp && t.text == "*":
			p.next()
			n, err := p.parseUnary()
			if err != nil {
				return nil, err
			}
			cur = mulJoin(cur, n)
		case t.typ == tOp && t.text == "/":
			p.next()
			n, err := p.parseUnary()
			if err != nil {
				return nil, err
			}
			cur = bin(KDiv, cur, n)
		case t.typ == tOp && t.text == "choose":
			p.next()
			n, err := p.parseUnary()
			if err != nil {
				return nil, err
			}
			cur = fn("binom", cur, n)
		case p.startsPrimary(t):
			n, err := p.parsePower()
			if err != nil {
				return nil, err
			}
			cur = mulJoin(cur, n)
		default:
			return cur, nil
		}
	}
}

func mulJoin(a, b *Node) *Node {
	if a.Kind == KMul {
		return &Node{Kind: KMul, Args: append(append([]*Node(nil), a.Args...), b)}
	}
	return &Node{Kind: KMul, Args: []*Node{a, b}}
}

func (p *parser) parseUnary() (*Node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	switch {
	case p.isOp("-"):
		p.next()
		n, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		return &Node{Kind: KNeg, Args: []*Node{n}}, nil
	case p.isOp("+"):
		p.next()
		return p.parseUnary()
	case p.isOp("pm"), p.isOp("mp"):
		// A leading ±: "\pm 2" is the pair {2, -2}.
		p.next()
		n, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		return bin(KPM, intNode(0), n), nil
	}
	return p.parsePower()
}

func (p *parser) parsePower() (*Node, error) {
	base, err := p.parsePrimary()
	if err != nil {
		return nil, err
	}
	base, err = p.parsePostfix(base)
	if err != nil {
		return nil, err
	}
	if !p.isOp("^") {
		return base, nil
	}
	p.next()
	// Degrees: x^\circ, x^{\circ}.
	if p.isOp("deg") {
		p.next()
		p.degs++
		return base, nil
	}
	if p.isOp("{") && p.peekAt(1).typ == tOp && p.peekAt(1).text == "deg" && p.peekAt(2).typ == tOp && p.peekAt(2).text == "}" {
		p.p += 3
		p.degs++
		return base, nil
	}
	exp, err := p.parseExponent()
	if err != nil {
		return nil, err
	}
	return p.parsePostfix(bin(KPow, base, exp))
}

func (p *parser) parseExponent() (*Node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	switch {
	case p.isOp("-"):
		p.next()
		n, err := p.parseExponent()
		if err != nil {
			return nil, err
		}
		return &Node{Kind: KNeg, Args: []*Node{n}}, nil
	case p.isOp("+"):
		p.next()
		return p.parseExponent()
	}
	base, err := p.parsePrimary()
	if err != nil {
		return nil, err
	}
	if p.isOp("!") {
		p.next()
		base = fn("factorial", base)
	}
	if p.isOp("^") {
		p.next()
		e, err := p.parseExponent()
		if err != nil {
			return nil, err
		}
		return bin(KPow, base, e), nil
	}
	return base, nil
}

func (p *parser) parsePostfix(n *Node) (*Node, error) {
	for {
		t := p.peek()
		switch {
		case t.typ == tOp && t.text == "!":
			p.next()
			n = fn("factorial", n)
		case t.typ == tOp && t.text == "%":
			p.next()
			n = &Node{Kind: KPercent, Args: []*Node{n}}
		case t.typ == tOp && t.text == "deg":
			p.next()
			p.degs++
		case t.typ == tOp && t.text == "'":
			p.next()
			if n.Kind == KSym {
				n = sym(n.Name + "'")
			}
		case t.typ == tText:
			// A unit after a value: "5\text{ cm}", "3 \text{ dollars}^2".
			p.next()
			if p.isOp("^") && p.peekAt(1).typ == tNum {
				p.p += 2
			}
		default:
			return n, nil
		}
	}
}

// textQuantity matches a number followed by unit words inside \text{…}:
// "5 apples", "3 hours", "100 km/h", "12 square units".
var textQuantity = regexp.MustCompile(`^([-+]?[0-9][0-9.,]*)\s*[A-Za-z]{2,}[A-Za-z /.]*(?:\^?[23])?$`)

// isProse reports whether text is words rather than a mathematical value.
func isProse(s string) bool {
	s = strings.TrimSpace(s)
	letters := 0
	for i := 0; i < len(s); i++ {
		if isLetter(s[i]) {
			letters++
		} else if s[i] != ' ' && s[i] != '.' && s[i] != '-' {
			return false
		}
	}
	return letters >= 2
}

var funcNames = map[string]bool{
	"sin": true, "cos": true, "tan": true, "sec": true, "csc": true, "cot": true, "arcsin": true,
	"arccos": true, "arctan": true, "sinh": true, "cosh": true, "tanh": true, "log": true, "ln": true,
	"exp": true, "log10": true, "sqrt": true, "gcd": true, "max": true, "min": true, "det": true,
}

func (p *parser) parsePrimary() (*Node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	t := p.next()
	switch t.typ {
	case tEOF:
		return nil, fmt.Errorf("%w: expression ends early", ErrSyntax)
	case tNum:
		n, err := parseNumber(t.text)
		if err != nil {
			return nil, fmt.Errorf("number at byte %d: %w", t.pos, err)
		}
		// Mixed number: 3\frac{1}{2} = 3 + 1/2.
		if isIntLiteral(t.text) && p.peek().typ == tCmd && p.peek().text == "frac" &&
			p.peekAt(1).typ == tOp && p.peekAt(1).text == "{" && p.peekAt(2).typ == tNum && isIntLiteral(p.peekAt(2).text) &&
			p.peekAt(3).typ == tOp && p.peekAt(3).text == "}" && p.peekAt(4).typ == tOp && p.peekAt(4).text == "{" &&
			p.peekAt(5).typ == tNum && isIntLiteral(p.peekAt(5).text) && p.peekAt(6).typ == tOp && p.peekAt(6).text == "}" {
			a, _ := parseNumber(p.peekAt(2).text)
			b, _ := parseNumber(p.peekAt(5).text)
			p.p += 7
			return &Node{Kind: KAdd, Args: []*Node{n, bin(KDiv, a, b)}}, nil
		}
		// Mixed number without braces: 1\frac12 = 1 + 1/2.
		if isIntLiteral(t.text) && p.peek().typ == tCmd && p.peek().text == "frac" &&
			p.peekAt(1).typ == tNum && len(p.peekAt(1).text) == 2 && isIntLiteral(p.peekAt(1).text) {
			d := p.peekAt(1).text
			a, _ := parseNumber(d[:1])
			b, _ := parseNumber(d[1:])
			p.p += 2
			return &Node{Kind: KAdd, Args: []*Node{n, bin(KDiv, a, b)}}, nil
		}
		return n, nil
	case tIdent:
		switch t.text {
		case "oo":
			return &Node{Kind: KInf}, nil
		case "emptyset":
			return &Node{Kind: KSet}, nil
		}
		if funcNames[t.text] {
			return p.parseFuncApp(t.text)
		}
		name := t.text
		if p.isOp("_") {
			p.next()
			sub, err := p.subscriptText()
			if err != nil {
				return nil, err
			}
			name += "_" + sub
		}
		return sym(name), nil
	case tText:
		body := strings.TrimSpace(t.text)
		if n, err := parseDepth(body, p.depth+1); err == nil && !isProse(body) {
			if m := textQuantity.FindStringSubmatch(body); m != nil {
				// "\text{5 apples}": parsed as mathematics this is the
				// product 5·a·p·p·l·e·s; it is the value 5 with a unit.
				if v, err := parseDepth(m[1], p.depth+1); err == nil {
					return v, nil
				}
			}
			return n, nil
		}
		return &Node{Kind: KText, Name: body}, nil
	case tCmd:
		return p.parseCommand(t)
	case tOp:
		switch t.text {
		case "(", "[":
			return p.parseBracket(t)
		case "{":
			inner, err := p.parseSeq(func(t token) bool { return t.typ == tOp && t.text == "}" })
			if err != nil {
				return nil, err
			}
			if err := p.expectOp("}"); err != nil {
				return nil, err
			}
			if inner.Kind == KList {
				inner.Kind = KSet
			}
			return inner, nil
		case `\{`:
			if p.isOp(`\}`) {
				p.next()
				return &Node{Kind: KSet}, nil
			}
			inner, err := p.parseSeq(func(t token) bool { return t.typ == tOp && t.text == `\}` })
			if err != nil {
				return nil, err
			}
			if err := p.expectOp(`\}`); err != nil {
				return nil, err
			}
			if inner.Kind == KList {
				inner.Kind = KSet
				return inner, nil
			}
			return &Node{Kind: KSet, Args: []*Node{inner}}, nil
		case "<<":
			inner, err := p.parseSeq(func(t token) bool { return t.typ == tOp && t.text == ">>" })
			if err != nil {
				return nil, err
			}
			if err := p.expectOp(">>"); err != nil {
				return nil, err
			}
			if inner.Kind == KList {
				inner.Kind = KTuple
				return inner, nil
			}
			return &Node{Kind: KTuple, Args: []*Node{inner}}, nil
		case "|":
			p.absDepth++
			inner, err := p.parseSum()
			p.absDepth--
			if err != nil {
				return nil, err
			}
			if err := p.expectOp("|"); err != nil {
				return nil, err
			}
			return fn("abs", inner), nil
		case "lfloor", "lceil":
			closer := "rfloor"
			name := "floor"
			if t.text == "lceil" {
				closer, name = "rceil", "ceil"
			}
			inner, err := p.parseSum()
			if err != nil {
				return nil, err
			}
			if err := p.expectOp(closer); err != nil {
				return nil, err
			}
			return fn(name, inner), nil
		}
	}
	return nil, fmt.Errorf("%w: unexpected %q at byte %d", ErrSyntax, t.text, t.pos)
}

func (p *parser) subscriptText() (string, error) {
	if p.isOp("{") {
		p.next()
		var b strings.Builder
		for !p.isOp("}") {
			t := p.next()
			if t.typ == tEOF {
				return "", fmt.Errorf("%w: unclosed subscript", ErrSyntax)
			}
			b.WriteString(t.text)
		}
		p.next()
		return b.String(), nil
	}
	t := p.next()
	if t.typ == tEOF {
		return "", fmt.Errorf("%w: empty subscript", ErrSyntax)
	}
	return t.text, nil
}

func (p *parser) parseBracket(open token) (*Node, error) {
	closeTok := func(t token) bool { return t.typ == tOp && (t.text == ")" || t.text == "]") }
	inner, err := p.parseSeq(closeTok)
	if err != nil {
		return nil, err
	}
	cl := p.next()
	if !closeTok(cl) {
		return nil, fmt.Errorf("%w: unclosed %q opened at byte %d", ErrSyntax, open.text, open.pos)
	}
	lo, ro := open.text == "(", cl.text == ")"
	if inner.Kind != KList {
		if lo == ro {
			return inner, nil
		}
		return nil, fmt.Errorf("%w: mismatched %q and %q at byte %d", ErrSyntax, open.text, cl.text, cl.pos)
	}
	if len(inner.Args) == 2 && !(lo && ro) {
		return &Node{Kind: KInterval, Args: inner.Args, LOpen: lo, ROpen: ro}, nil
	}
	if lo != ro {
		return nil, fmt.Errorf("%w: mismatched %q and %q at byte %d", ErrSyntax, open.text, cl.text, cl.pos)
	}
	inner.Kind = KTuple
	return inner, nil
}

// parseArg reads a command argument: a {group} or a single token; a
// multi-digit number is split so that \frac12 is 1/2.
func (p *parser) parseArg() (*Node, error) {
	if p.isOp("{") {
		p.next()
		inner, err := p.parseSeq(func(t token) bool { return t.typ == tOp && t.text == "}" })
		if err != nil {
			return nil, err
		}
		if err := p.expectOp("}"); err != nil {
			return nil, err
		}
		return inner, nil
	}
	t := p.peek()
	if t.typ == tNum && len(t.text) > 1 && isIntLiteral(t.text) {
		p.toks[p.p].text = t.text[1:]
		return parseNumber(t.text[:1])
	}
	return p.parsePrimary()
}

func (p *parser) parseCommand(t token) (*Node, error) {
	switch {
	case t.text == "frac":
		a, err := p.parseArg()
		if err != nil {
			return nil, err
		}
		b, err := p.parseArg()
		if err != nil {
			return nil, err
		}
		return bin(KDiv, a, b), nil
	case t.text == "binom":
		a, err := p.parseArg()
		if err != nil {
			return nil, err
		}
		b, err := p.parseArg()
		if err != nil {
			return nil, err
		}
		return fn("binom", a, b), nil
	case t.text == "sqrt":
		var index *Node
		if p.isOp("[") {
			p.next()
			var err error
			index, err = p.parseSeq(func(t token) bool { return t.typ == tOp && t.text == "]" })
			if err != nil {
				return nil, err
			}
			if err := p.expectOp("]"); err != nil {
				return nil, err
			}
		}
		var a *Node
		var err error
		if p.isOp("(") {
			a, err = p.parsePrimary()
		} else {
			a, err = p.parseArg()
		}
		if err != nil {
			return nil, err
		}
		if index != nil {
			return fn("root", a, index), nil
		}
		return fn("sqrt", a), nil
	case t.text == "mathbb":
		a := p.next()
		if a.typ == tOp && a.text == "{" {
			a = p.next()
			if err := p.expectOp("}"); err != nil {
				return nil, err
			}
		}
		if a.text == "R" {
			return &Node{Kind: KInterval, Args: []*Node{{Kind: KNeg, Args: []*Node{{Kind: KInf}}}, {Kind: KInf}}, LOpen: true, ROpen: true}, nil
		}
		return sym("set_" + a.text), nil
	case strings.HasPrefix(t.text, "begin:"):
		return p.parseEnv(strings.TrimPrefix(t.text, "begin:"))
	}
	return nil, fmt.Errorf("%w: unexpected \\%s at byte %d", ErrSyntax, t.text, t.pos)
}

var matrixEnvs = map[string]bool{
	"pmatrix": true, "bmatrix": true, "Bmatrix": true, "matrix": true, "vmatrix": true,
	"Vmatrix": true, "smallmatrix": true, "array": true,
}

func (p *parser) parseEnv(env string) (*Node, error) {
	end := "end:" + env
	isEnd := func(t token) bool { return t.typ == tCmd && t.text == end }
	if !matrixEnvs[env] {
		inner, err := p.parseSeq(isEnd)
		if err != nil {
			return nil, err
		}
		if !isEnd(p.next()) {
			return nil, fmt.Errorf("%w: missing \\end{%s}", ErrSyntax, env)
		}
		return inner, nil
	}
	var rows [][]*Node
	row := []*Node{}
	for {
		if isEnd(p.peek()) {
			p.next()
			break
		}
		if p.peek().typ == tEOF {
			return nil, fmt.Errorf("%w: missing \\end{%s}", ErrSyntax, env)
		}
		cell, err := p.parseRel()
		if err != nil {
			return nil, err
		}
		row = append(row, cell)
		switch {
		case p.isOp("&"):
			p.next()
		case p.isOp(`\\`):
			p.next()
			rows = append(rows, row)
			row = []*Node{}
		case isEnd(p.peek()):
		case p.peek().typ == tEOF:
			return nil, fmt.Errorf("%w: missing \\end{%s}", ErrSyntax, env)
		default:
			return nil, fmt.Errorf("%w: unexpected %q in %s at byte %d", ErrSyntax, p.peek().text, env, p.peek().pos)
		}
	}
	if len(row) > 0 {
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%w: empty %s", ErrEmpty, env)
	}
	m := &Node{Kind: KMatrix, Rows: len(rows), Cols: len(rows[0])}
	for i, r := range rows {
		if len(r) != m.Cols {
			return nil, fmt.Errorf("%w: %s row %d has %d cells, row 0 has %d", ErrSyntax, env, i, len(r), m.Cols)
		}
		m.Args = append(m.Args, r...)
	}
	if env == "vmatrix" || env == "Vmatrix" {
		return fn("det", m), nil
	}
	return m, nil
}

// trigFuncs take an angle: a degree sign in the argument converts it to
// radians, so \sin 30^\circ = 1/2 (a bare answer "30^\circ" stays 30).
var trigFuncs = map[string]bool{"sin": true, "cos": true, "tan": true, "sec": true, "csc": true, "cot": true}

func (p *parser) parseFuncApp(name string) (*Node, error) {
	degsBefore := p.degs
	var power *Node
	var base *Node
	if name == "log" && p.isOp("_") {
		p.next()
		b, err := p.parseArg()
		if err != nil {
			return nil, err
		}
		base = b
	}
	// \sin^2 x means (\sin x)^2; \sin^{-1} x means arcsin x.
	if p.isOp("^") {
		p.next()
		e, err := p.parseExponent()
		if err != nil {
			return nil, err
		}
		power = e
	}
	var args []*Node
	if p.isOp("(") {
		p.next()
		inner, err := p.parseSeq(func(t token) bool { return t.typ == tOp && t.text == ")" })
		if err != nil {
			return nil, err
		}
		if err := p.expectOp(")"); err != nil {
			return nil, err
		}
		if inner.Kind == KList {
			args = inner.Args
		} else {
			args = []*Node{inner}
		}
	} else {
		// \sin 2x: the argument is the next factor together with the implicit product that follows it.
		a, err := p.parsePower()
		if err != nil {
			return nil, err
		}
		for p.peek().typ == tIdent && !funcNames[p.peek().text] && len(p.peek().text) == 1 && a.Kind == KNum {
			b, err := p.parsePower()
			if err != nil {
				return nil, err
			}
			a = mulJoin(a, b)
		}
		args = []*Node{a}
	}
	if trigFuncs[name] && len(args) == 1 && p.degs > degsBefore {
		args[0] = mulJoin(args[0], bin(KDiv, sym("pi"), intNode(180)))
	}
	if name == "sqrt" {
		if len(args) != 1 {
			return nil, fmt.Errorf("%w: sqrt takes one argument", ErrSyntax)
		}
	}
	var out *Node
	if base != nil {
		if len(args) != 1 {
			return nil, fmt.Errorf("%w: log takes one argument", ErrSyntax)
		}
		out = bin(KDiv, fn("ln", args[0]), fn("ln", base))
	} else {
		if name == "log" {
			name = "ln" // natural log, as sympy and Math-Verify read \log
		}
		out = fn(name, args...)
	}
	if power != nil {
		if power.Kind == KNeg && len(power.Args) == 1 && power.Args[0].Kind == KNum && power.Args[0].Num.Cmp(big.NewRat(1, 1)) == 0 {
			switch name {
			case "sin", "cos", "tan":
				return fn("arc"+name, args...), nil
			}
		}
		out = bin(KPow, out, power)
	}
	return out, nil
}

func isIntLiteral(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// parseNumber converts a lexed literal to an exact rational. Scientific
// notation keeps its power of ten as a KPow node so that 1e999999999 costs
// nothing until (and unless) it is evaluated under the size limits.
func parseNumber(text string) (*Node, error) {
	mant, exp, hasExp := strings.Cut(text, "e")
	r, ok := new(big.Rat).SetString(mant)
	if !ok {
		return nil, fmt.Errorf("%w: bad number %q", ErrSyntax, text)
	}
	if !hasExp {
		return num(r), nil
	}
	e, err := strconv.ParseInt(exp, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%w: exponent of %q: %w", ErrTooLarge, text, err)
	}
	return mulJoin(num(r), bin(KPow, intNode(10), intNode(e))), nil
}
