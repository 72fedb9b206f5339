// Package arith is the task of examples/arith, the main job, shared with
// examples/ablation: generated arithmetic word problems, the byte
// tokenizer and chat markup, the tool-use SFT trajectories, the RL
// configuration, rollout engine and reward of the RL stage, and the
// held-out evaluation. Both programs build the same task from it, so an
// ablation's baseline is the main job's RL stage.
//
// It is internal to examples: programs outside examples/ build the same
// from the public packages it calls.
package arith

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/agentrl/agentrl/dataset"
)

// Problem is one arithmetic word problem: the text the model reads, the
// Python expression that solves it (its numbers in the order the text
// gives them), and the exact integer answer.
type Problem struct {
	ID     string // prefix-i, i its index in the generated list
	Text   string // the word problem
	Expr   string // the Python expression of the answer
	Answer int64  // the exact answer
	Steps  int    // arithmetic operations in Expr
}

// template is one kind of word problem. Each draws its numbers, in order
// of appearance, and combines them with a fixed expression shape.
type template struct {
	text  string // fmt verbs %d for each number, in order
	expr  string // fmt verbs %d, same order
	steps int    // arithmetic operations
	draw  func(*rand.Rand) []int64
	eval  func(n []int64) int64
}

// digits draws a number with between lo and hi decimal digits.
func digits(r *rand.Rand, lo, hi int) int64 {
	d := lo + r.IntN(hi-lo+1)
	min := int64(1)
	for range d - 1 {
		min *= 10
	}
	return min + r.Int64N(9*min)
}

// templates are the problem kinds. The quantities are 3–5 digits, the
// multipliers 2 digits, and every answer is a positive integer of up to 7
// digits: products a tiny model cannot compute in its head, and numbers
// short enough for its 2 layers to copy reliably (with 4–7 digit
// quantities, most of its errors were miscopied digits).
var templates = []template{
	{
		text: "A warehouse holds %d boxes; %d are shipped and each remaining box holds %d items. How many items are left?",
		expr: "(%d-%d)*%d", steps: 2,
		draw: func(r *rand.Rand) []int64 { return []int64{digits(r, 4, 5), digits(r, 3, 3), digits(r, 2, 2)} },
		eval: func(n []int64) int64 { return (n[0] - n[1]) * n[2] },
	},
	{
		text: "A farm has %d hens and buys %d more. Each hen lays %d eggs. How many eggs are laid?",
		expr: "(%d+%d)*%d", steps: 2,
		draw: func(r *rand.Rand) []int64 { return []int64{digits(r, 3, 5), digits(r, 3, 3), digits(r, 2, 2)} },
		eval: func(n []int64) int64 { return (n[0] + n[1]) * n[2] },
	},
	{
		text: "A factory makes %d parts a day for %d days and ships %d parts. How many parts remain?",
		expr: "%d*%d-%d", steps: 2,
		draw: func(r *rand.Rand) []int64 { return []int64{digits(r, 3, 4), digits(r, 2, 2), digits(r, 3, 4)} },
		eval: func(n []int64) int64 { return n[0]*n[1] - n[2] },
	},
	{
		text: "A library has %d books, receives %d more, then lends out %d. How many books are on the shelves?",
		expr: "%d+%d-%d", steps: 2,
		draw: func(r *rand.Rand) []int64 { return []int64{digits(r, 4, 5), digits(r, 3, 4), digits(r, 3, 4)} },
		eval: func(n []int64) int64 { return n[0] + n[1] - n[2] },
	},
	{
		text: "A town has %d homes and %d more are built. Each home uses %d liters a day and %d liters are recycled. How many liters are used?",
		expr: "(%d+%d)*%d-%d", steps: 3,
		draw: func(r *rand.Rand) []int64 {
			return []int64{digits(r, 3, 4), digits(r, 3, 3), digits(r, 2, 2), digits(r, 3, 4)}
		},
		eval: func(n []int64) int64 { return (n[0]+n[1])*n[2] - n[3] },
	},
	{
		text: "A ship carries %d crates of %d kg each. It unloads %d kg, then %d kg more. How many kg are still on board?",
		expr: "%d*%d-%d-%d", steps: 3,
		draw: func(r *rand.Rand) []int64 {
			return []int64{digits(r, 3, 4), digits(r, 2, 2), digits(r, 3, 3), digits(r, 3, 3)}
		},
		eval: func(n []int64) int64 { return n[0]*n[1] - n[2] - n[3] },
	},
}

// GenerateProblems returns n problems drawn from seed, with IDs
// prefix-0, prefix-1, …; the same seed gives the same problems. Problems
// whose answer would not be positive are redrawn.
func GenerateProblems(seed uint64, n int, prefix string) []Problem {
	r := newProblemRand(seed)
	out := make([]Problem, 0, n)
	for len(out) < n {
		if p, ok := drawProblem(r); ok {
			p.ID = fmt.Sprintf("%s-%d", prefix, len(out))
			out = append(out, p)
		}
	}
	return out
}

// The answer lengths, in digits, that GenerateBalancedProblems gives
// equal shares: 4 to 7. As drawn, about 11%, 47%, 32% and 10% of the
// answers have 4, 5, 6 and 7 digits, and fewer than 1% have 3 or fewer.
const (
	BalancedMinDigits = 4
	BalancedMaxDigits = 7
)

// GenerateBalancedProblems returns n problems drawn from seed as
// GenerateProblems draws them, keeping only as many of each answer length
// as make the lengths BalancedMinDigits to BalancedMaxDigits equal
// shares (n/4 each, the shorter n mod 4 lengths one more) and skipping
// answers of other lengths.
// A model that copies a tool's result then practises every length as
// often: trained on the drawn mix, one seed's SFT policy copied 5- and
// 6-digit results right and miscopied nearly every 4- and 7-digit one.
func GenerateBalancedProblems(seed uint64, n int, prefix string) []Problem {
	const lengths = BalancedMaxDigits - BalancedMinDigits + 1
	var quota [BalancedMaxDigits + 1]int // by answer length in digits
	for i := range n {
		quota[BalancedMinDigits+i%lengths]++
	}
	r := newProblemRand(seed)
	out := make([]Problem, 0, n)
	for len(out) < n {
		p, ok := drawProblem(r)
		if !ok {
			continue
		}
		d := len(strconv.FormatInt(p.Answer, 10))
		if d < BalancedMinDigits || d > BalancedMaxDigits || quota[d] == 0 {
			continue
		}
		quota[d]--
		p.ID = fmt.Sprintf("%s-%d", prefix, len(out))
		out = append(out, p)
	}
	return out
}

func newProblemRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)) }

// drawProblem draws one problem, its ID unset; false when its answer is
// not positive.
func drawProblem(r *rand.Rand) (Problem, bool) {
	t := templates[r.IntN(len(templates))]
	nums := t.draw(r)
	ans := t.eval(nums)
	if ans <= 0 {
		return Problem{}, false
	}
	args := make([]any, len(nums))
	for i, v := range nums {
		args[i] = v
	}
	return Problem{
		Text:   fmt.Sprintf(t.text, args...),
		Expr:   fmt.Sprintf(t.expr, args...),
		Answer: ans,
		Steps:  t.steps,
	}, true
}

// RoughGuess is what a model answering without a tool writes: the answer
// rounded to two significant digits, almost always wrong.
func RoughGuess(v int64) string {
	s := strconv.FormatInt(v, 10)
	if len(s) <= 2 {
		return s
	}
	return s[:2] + strings.Repeat("0", len(s)-2)
}

// VerlExamples are probs as rows of a verl-format prompt set: data
// source "arith", the problem as one user message, the answer as a rule
// ground truth, and the expression and index in extra_info, so that
// examples/eval and examples/grpotcr read the task's problems.
func VerlExamples(probs []Problem, split string) []dataset.Example {
	out := make([]dataset.Example, len(probs))
	for i, p := range probs {
		out[i] = dataset.Example{
			DataSource:  "arith",
			Prompt:      []dataset.Message{{Role: "user", Content: p.Text}},
			Ability:     "math",
			RewardModel: dataset.RewardModel{Style: "rule", GroundTruth: dataset.GroundTruth{Kind: dataset.GroundTruthString, Value: strconv.FormatInt(p.Answer, 10)}},
			ExtraInfo:   map[string]any{"index": i, "split": split, "id": p.ID, "expr": p.Expr},
		}
	}
	return out
}
