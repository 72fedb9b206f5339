// Package mathexpr parses LaTeX and plain-text mathematical answers into
// expression trees and decides whether two answers are equivalent: first by
// exact arithmetic over the rationals extended with radicals, i, π, e and
// free symbols (math/big), then by numeric evaluation at a tight relative
// tolerance where the exact route cannot decide (transcendental functions),
// with structural rules for sets, tuples, intervals, matrices, relations and
// text.
//
// Every entry point is bounded: input length, nesting depth, the size of
// exact intermediate results and the number of arithmetic steps are capped,
// and the context is polled, so no input can hang or exhaust memory.
//
// The package is internal to reward; reward.MathVerify is its public face.
package mathexpr

import (
	"math/big"
	"strings"
)

// Kind says what a Node is.
type Kind int

// Node kinds.
const (
	KNum      Kind = iota // exact rational literal (Num)
	KSym                  // variable or named constant (Name): "x", "pi", "e", "i"
	KInf                  // ∞ (sign through KNeg)
	KAdd                  // sum of Args
	KMul                  // product of Args
	KDiv                  // Args[0] / Args[1]
	KNeg                  // -Args[0]
	KPow                  // Args[0] ^ Args[1]
	KFunc                 // Name(Args...): sqrt, root, sin, log, abs, factorial, binom...
	KPercent              // Args[0] %
	KPM                   // Args[0] ± Args[1]
	KRel                  // Args[0] Ops[0] Args[1] Ops[1] Args[2] ...
	KList                 // a bare comma list: "1, 2" (matches sets or tuples)
	KSet                  // \{...\}: unordered
	KTuple                // (a, b, ...): ordered; with two elements also an open interval
	KInterval             // [a, b), (a, b], [a, b]: Args[0], Args[1], LOpen, ROpen
	KUnion                // union of sets and intervals
	KMatrix               // Rows × Cols cells, row-major in Args
	KText                 // text that is not mathematics (Name)
)

// Node is one vertex of an expression tree.
type Node struct {
	Kind  Kind
	Num   *big.Rat
	Name  string
	Args  []*Node
	Ops   []string // KRel: "=", "<", "<=", ">", ">=", "!=", "in"
	LOpen bool     // KInterval
	ROpen bool     // KInterval
	Rows  int      // KMatrix
	Cols  int      // KMatrix
}

// String renders the tree in a compact plain syntax, used as a canonical key
// for opaque sub-expressions and in reasons.
func (n *Node) String() string {
	var b strings.Builder
	n.write(&b, 0)
	return b.String()
}

func (n *Node) write(b *strings.Builder, depth int) {
	if depth > maxDepth {
		b.WriteString("…")
		return
	}
	list := func(open, close string) {
		b.WriteString(open)
		for i, a := range n.Args {
			if i > 0 {
				b.WriteString(", ")
			}
			a.write(b, depth+1)
		}
		b.WriteString(close)
	}
	switch n.Kind {
	case KNum:
		if n.Num.IsInt() {
			b.WriteString(n.Num.Num().String())
		} else {
			b.WriteString(n.Num.String())
		}
	case KSym:
		b.WriteString(n.Name)
	case KInf:
		b.WriteString("oo")
	case KAdd, KMul:
		op := " + "
		if n.Kind == KMul {
			op = "*"
		}
		b.WriteString("(")
		for i, a := range n.Args {
			if i > 0 {
				b.WriteString(op)
			}
			a.write(b, depth+1)
		}
		b.WriteString(")")
	case KDiv:
		b.WriteString("(")
		n.Args[0].write(b, depth+1)
		b.WriteString("/")
		n.Args[1].write(b, depth+1)
		b.WriteString(")")
	case KNeg:
		b.WriteString("-")
		n.Args[0].write(b, depth+1)
	case KPow:
		b.WriteString("(")
		n.Args[0].write(b, depth+1)
		b.WriteString("^")
		n.Args[1].write(b, depth+1)
		b.WriteString(")")
	case KFunc:
		b.WriteString(n.Name)
		list("(", ")")
	case KPercent:
		n.Args[0].write(b, depth+1)
		b.WriteString("%")
	case KPM:
		b.WriteString("(")
		n.Args[0].write(b, depth+1)
		b.WriteString(" ± ")
		n.Args[1].write(b, depth+1)
		b.WriteString(")")
	case KRel:
		for i, a := range n.Args {
			if i > 0 {
				b.WriteString(" " + n.Ops[i-1] + " ")
			}
			a.write(b, depth+1)
		}
	case KList:
		list("", "")
	case KSet:
		list("{", "}")
	case KTuple:
		list("(", ")")
	case KInterval:
		l, r := "[", "]"
		if n.LOpen {
			l = "("
		}
		if n.ROpen {
			r = ")"
		}
		list(l, r)
	case KUnion:
		for i, a := range n.Args {
			if i > 0 {
				b.WriteString(" U ")
			}
			a.write(b, depth+1)
		}
	case KMatrix:
		list("matrix(", ")")
	case KText:
		b.WriteString(n.Name)
	}
}

func num(r *big.Rat) *Node  { return &Node{Kind: KNum, Num: r} }
func intNode(v int64) *Node { return num(new(big.Rat).SetInt64(v)) }
func sym(name string) *Node { return &Node{Kind: KSym, Name: name} }
func fn(name string, args ...*Node) *Node {
	return &Node{Kind: KFunc, Name: name, Args: args}
}
func bin(k Kind, a, b *Node) *Node { return &Node{Kind: k, Args: []*Node{a, b}} }
