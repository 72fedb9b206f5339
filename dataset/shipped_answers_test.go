package dataset_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/dataset"
	"github.com/agentrl/agentrl/policy/tokenizer"
)

// The repository ships small data sets (examples' training and evaluation
// sets, this package's fixtures); a wrong answer in one of them teaches or
// grades a model wrongly without any error. TestShippedAnswers finds every
// .jsonl and .parquet file in the module and re-derives each answer it
// holds here, from the question, independently of the file: arithmetic
// with math/big, word problems by the arithmetic written next to them,
// code tests by running a Go solution of the problem on each test input.
// A question the tables below do not know fails the test, so a data set
// added later gets its answers checked too.

// shippedFile says how a data file is read, or why it holds no answers.
type shippedFile struct {
	verl      *dataset.Options // an RL set in verl's layout
	sft       bool             // SFT conversations
	noAnswers string           // why the file has no answers to check
}

var shippedFiles = map[string]shippedFile{
	"examples/eval/testdata/eval.jsonl":                      {verl: &dataset.Options{}},
	"examples/grpotcr/testdata/train.jsonl":                  {verl: &dataset.Options{}},
	"examples/grpotcr/testdata/val.jsonl":                    {verl: &dataset.Options{}},
	"dataset/testdata/verl_mixed.jsonl":                      {verl: &dataset.Options{}},
	"dataset/testdata/code_tests_hyparquet.parquet":          {verl: &dataset.Options{}},
	"dataset/testdata/math_int_gt_hyparquet.parquet":         {verl: &dataset.Options{}},
	"dataset/testdata/math_list_gt_hyparquet.parquet":        {verl: &dataset.Options{}},
	"dataset/testdata/verl_gsm8k_hyparquet.parquet":          {verl: &dataset.Options{}},
	"dataset/testdata/openagentrl_lcb_hyparquet.parquet":     {verl: &dataset.Options{PromptKey: "problem", StringPrompt: true}},
	"dataset/testdata/sft_conversations.jsonl":               {sft: true},
	"dataset/testdata/sft_openagentrl_hyparquet.parquet":     {sft: true},
	"dataset/testdata/crlf_no_final_newline.jsonl":           {noAnswers: "a line-ending fixture whose prompts ask nothing"},
	"dataset/testdata/legacy_list_hyparquet.parquet":         {noAnswers: "a fixture of parquet's legacy LIST layout: its prompts ask nothing"},
	"dataset/testdata/bad_missing_content_hyparquet.parquet": {noAnswers: "malformed on purpose (messages without content), no reward_model"},
	"dataset/testdata/bad_prompt_string_hyparquet.parquet":   {noAnswers: "malformed on purpose (the prompt a string), no reward_model"},
	"reward/testdata/math_cases.jsonl":                       {noAnswers: "the math grader's labelled corpus: package reward's TestMathCorpusValues re-derives its values"},
	"tool/search/encyclopedia/data/corpus.jsonl":             {noAnswers: "the encyclopedia's passages: package encyclopedia's TestShippedFiles checks the file is Generate's output"},
	"tool/search/encyclopedia/data/train.jsonl":              {noAnswers: "search questions: package encyclopedia's TestQuestionsAreAnswerable checks each answer is written in the passage the question leads to, TestShippedFiles that the file is that output"},
	"tool/search/encyclopedia/data/test.jsonl":               {noAnswers: "search questions: package encyclopedia's TestQuestionsAreAnswerable checks each answer is written in the passage the question leads to, TestShippedFiles that the file is that output"},
}

// shippedDirs are folders whose data files hold no answers.
var shippedDirs = map[string]string{
	"policy/tokenizer/testdata/": "the tokenizer's goldens (texts and their token ids from Hugging Face tokenizers), checked by package tokenizer's tests",
}

// rat is an exact answer.
func rat(x *big.Int) *big.Rat { return new(big.Rat).SetInt(x) }

func pow(b, e int64) *big.Int { return new(big.Int).Exp(big.NewInt(b), big.NewInt(e), nil) }

// mathAnswers derives the answer of each math question, keyed by the
// start of the question (the last user message).
var mathAnswers = map[string]func() *big.Rat{
	"What is 7**20?": func() *big.Rat { return rat(pow(7, 20)) },
	"What is 123456789 * 987654321?": func() *big.Rat {
		return rat(new(big.Int).Mul(big.NewInt(123456789), big.NewInt(987654321)))
	},
	"What is 2**64 - 1?": func() *big.Rat { return rat(new(big.Int).Sub(pow(2, 64), big.NewInt(1))) },
	// A question the scripted agent of examples/eval's tests answers
	// wrongly on purpose (it answers "What is …?" with the number).
	"What is 2**64 - 1? Use the code tool, then put the number of its decimal digits (not the number)": func() *big.Rat {
		return big.NewRat(int64(len(new(big.Int).Sub(pow(2, 64), big.NewInt(1)).String())), 1)
	},
	"What is 3**30?": func() *big.Rat { return rat(pow(3, 30)) },
	"What is 6 * 7?": func() *big.Rat { return big.NewRat(6*7, 1) },
	"Half of 3?":     func() *big.Rat { return big.NewRat(3, 2) },
	// The positive root of x² = 4: 4 is a perfect square, so its integer
	// square root is the root.
	"x^2 = 4, x > 0?": func() *big.Rat { return rat(new(big.Int).Sqrt(big.NewInt(4))) },
	"Find the remainder when 2^100 is divided by 7.": func() *big.Rat {
		return rat(new(big.Int).Exp(big.NewInt(2), big.NewInt(100), big.NewInt(7)))
	},
	"How many positive divisors does 2024 have?": func() *big.Rat {
		n := int64(0)
		for d := int64(1); d <= 2024; d++ {
			if 2024%d == 0 {
				n++
			}
		}
		return big.NewRat(n, 1)
	},
	"What is 1/2 as a decimal?": func() *big.Rat { return big.NewRat(1, 2) },
	// ∫₀^π sin x dx = [−cos x]₀^π = −cos π + cos 0 (both exact in float64).
	"Integrate sin from 0 to pi.": func() *big.Rat { return new(big.Rat).SetFloat64(-math.Cos(math.Pi) + math.Cos(0)) },
	// GSM8K: 48 in April, half as many in May.
	"Natalia sold clips to 48 of her friends in April": func() *big.Rat { return big.NewRat(48+48/2, 1) },
	// $12 an hour for 50 minutes.
	"Weng earns $12 an hour for babysitting.": func() *big.Rat { return big.NewRat(12*50, 60) },
	// A $100 wallet; she has half; parents give 15, grandparents twice that.
	"Betty is saving money for a new wallet": func() *big.Rat { return big.NewRat(100-(100/2+15+2*15), 1) },
	// 120 pages; 12 yesterday, twice that today; half of the rest tomorrow.
	"Julie is reading a 120-page book.": func() *big.Rat { return big.NewRat(120-12-2*12, 2) },
	// 3 pages to each of 2 friends, twice a week, 52 weeks.
	"James writes a 3-page letter to 2 different friends twice a week.": func() *big.Rat { return big.NewRat(3*2*2*52, 1) },
}

// noAnswerQuestions ask nothing that has an answer, on purpose.
var noAnswerQuestions = map[string]string{
	"No answer given.": "a fixture of an empty ground-truth list",
}

// ints reads the whitespace-separated integers of s.
func ints(s string) ([]*big.Int, error) {
	var out []*big.Int
	for _, f := range strings.Fields(s) {
		x, ok := new(big.Int).SetString(f, 10)
		if !ok {
			return nil, fmt.Errorf("%q is not an integer", f)
		}
		out = append(out, x)
	}
	return out, nil
}

// twoInts reads "a b".
func twoInts(in string) (*big.Int, *big.Int, error) {
	xs, err := ints(in)
	if err != nil {
		return nil, nil, err
	}
	if len(xs) != 2 {
		return nil, nil, fmt.Errorf("want two integers, got %q", in)
	}
	return xs[0], xs[1], nil
}

func sumOf(in string) (string, error) {
	a, b, err := twoInts(in)
	if err != nil {
		return "", err
	}
	return new(big.Int).Add(a, b).String() + "\n", nil
}

// stdinSolutions solve the stdin/stdout code problems, keyed by the start
// of the problem statement.
var stdinSolutions = map[string]func(in string) (string, error){
	"Read two integers a and b from one line of stdin and print their product.": func(in string) (string, error) {
		a, b, err := twoInts(in)
		if err != nil {
			return "", err
		}
		return new(big.Int).Mul(a, b).String() + "\n", nil
	},
	"Read two integers a and b from one line of stdin and print their sum.": sumOf,
	"Given two integers a and b on one line, print their sum.":              sumOf,
	"Add two numbers.": sumOf,
	// A count n, then n numbers.
	"Sum the numbers.": func(in string) (string, error) {
		xs, err := ints(in)
		if err != nil {
			return "", err
		}
		if len(xs) == 0 || xs[0].Int64() != int64(len(xs)-1) {
			return "", fmt.Errorf("want a count and that many numbers, got %q", in)
		}
		s := new(big.Int)
		for _, x := range xs[1:] {
			s.Add(s, x)
		}
		return s.String() + "\n", nil
	},
	"Double it.": func(in string) (string, error) {
		xs, err := ints(in)
		if err != nil || len(xs) != 1 {
			return "", fmt.Errorf("want one integer, got %q", in)
		}
		return new(big.Int).Lsh(xs[0], 1).String() + "\n", nil
	},
	"Echo the input.": func(in string) (string, error) { return in, nil },
}

// jsonValues decodes the JSON values of s, one after the other (a
// call-based test's arguments, newline-separated in LiveCodeBench).
func jsonValues(s string) ([]any, error) {
	d := json.NewDecoder(strings.NewReader(s))
	var out []any
	for {
		var v any
		if err := d.Decode(&v); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
}

// callSolutions solve the call-based problems: the test's input as
// stored, the function's result as a JSON value.
var callSolutions = map[string]func(in string) (any, error){
	// Skywork layout: the input is the list of arguments.
	"Write total(nums).": func(in string) (any, error) {
		vs, err := jsonValues(in)
		if err != nil || len(vs) != 1 {
			return nil, fmt.Errorf("want one argument list, got %q", in)
		}
		args, ok := vs[0].([]any)
		if !ok || len(args) != 1 {
			return nil, fmt.Errorf("want total(nums), got %q", in)
		}
		nums, ok := args[0].([]any)
		if !ok {
			return nil, fmt.Errorf("nums %q is not a list", in)
		}
		s := 0.0
		for _, x := range nums {
			s += x.(float64)
		}
		return s, nil
	},
	// LiveCodeBench layout: the arguments, one JSON value per line.
	"Implement twoSum(nums, target)": func(in string) (any, error) {
		vs, err := jsonValues(in)
		if err != nil || len(vs) != 2 {
			return nil, fmt.Errorf("want nums and target, got %q", in)
		}
		nums, ok := vs[0].([]any)
		target, ok2 := vs[1].(float64)
		if !ok || !ok2 {
			return nil, fmt.Errorf("want a list and a number, got %q", in)
		}
		for i := range nums {
			for j := i + 1; j < len(nums); j++ {
				if nums[i].(float64)+nums[j].(float64) == target {
					return []any{float64(i), float64(j)}, nil
				}
			}
		}
		return nil, fmt.Errorf("no two numbers of %q add up to the target", in)
	},
}

// assertSolutions solve the assert-style problems: the function the
// asserts call, on integers.
var assertSolutions = map[string]func(x int64) int64{
	"Write double(x).": func(x int64) int64 { return 2 * x },
}

// assertCall matches "assert candidate(X) == Y".
var assertCall = regexp.MustCompile(`^\s*assert candidate\((-?\d+)\) == (-?\d+)\s*$`)

// parseRat reads an answer as the checks write them: an integer, a
// decimal, or \frac{a}{b}.
func parseRat(s string) (*big.Rat, bool) {
	s = strings.TrimSpace(s)
	if m := regexp.MustCompile(`^\\frac\{(-?\d+)\}\{(\d+)\}$`).FindStringSubmatch(s); m != nil {
		return new(big.Rat).SetString(m[1] + "/" + m[2])
	}
	if strings.ContainsAny(s, "/eE") { // SetString would take 1/2 and 1e3
		return nil, false
	}
	return new(big.Rat).SetString(s)
}

// questionOf finds the key of table for the question q: the longest key
// that starts q.
func questionOf[V any](table map[string]V, q string) (string, bool) {
	best, found := "", false
	for k := range table {
		if strings.HasPrefix(q, k) && len(k) >= len(best) {
			best, found = k, true
		}
	}
	return best, found
}

// moduleRoot is the folder that holds go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, parent, dir, "no go.mod above the test")
		dir = parent
	}
}

// TestShippedAnswers re-derives the answers of every data set in the
// repository (see shippedFiles and the tables of solutions).
func TestShippedAnswers(t *testing.T) {
	root := moduleRoot(t)
	var found []string
	require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "fuzz" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if ext := filepath.Ext(path); !d.IsDir() && (ext == ".jsonl" || ext == ".parquet") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			found = append(found, filepath.ToSlash(rel))
		}
		return nil
	}))
	for _, rel := range found {
		t.Run(rel, func(t *testing.T) {
			for dir := range shippedDirs {
				if strings.HasPrefix(rel, dir) {
					return
				}
			}
			f, ok := shippedFiles[rel]
			require.True(t, ok, "%s: a data file whose answers no check re-derives: add it to shippedFiles", rel)
			path := filepath.Join(root, filepath.FromSlash(rel))
			switch {
			case f.verl != nil:
				exs, err := dataset.Load(context.Background(), *f.verl, path)
				require.NoError(t, err)
				require.NotEmpty(t, exs)
				for _, ex := range exs {
					assert.NoError(t, checkExample(ex))
				}
			case f.sft:
				convs, err := dataset.LoadSFT(context.Background(), dataset.SFTOptions{}, path)
				require.NoError(t, err)
				require.NotEmpty(t, convs)
				for _, c := range convs {
					assert.NoError(t, checkConversation(c))
				}
			default:
				require.NotEmpty(t, f.noAnswers)
			}
		})
	}
	for rel := range shippedFiles {
		assert.Contains(t, found, rel, "listed in shippedFiles but not in the repository")
	}
}

// lastUser is the text of a prompt's last user message.
func lastUser(msgs []dataset.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return msgs[i].Content
		}
	}
	return ""
}

// checkExample checks one RL example's answers or tests.
func checkExample(ex dataset.Example) error {
	q := lastUser(ex.Prompt)
	var errs []error
	fail := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("row %d (%.60q): %s", ex.Row, q, fmt.Sprintf(format, a...)))
	}
	if k, ok := questionOf(mathAnswers, q); ok {
		want := mathAnswers[k]()
		answers, err := ex.RewardModel.GroundTruth.Answers()
		if err != nil || len(answers) == 0 {
			fail("no answers: %v", err)
		}
		// The same answer where tools and worked solutions repeat it.
		if tk, ok := ex.ExtraInfo["tools_kwargs"].(map[string]any); ok {
			for name, v := range tk {
				kw, _ := v.(map[string]any)
				ck, _ := kw["create_kwargs"].(map[string]any)
				if gt, ok := ck["ground_truth"].(string); ok {
					answers = append(answers, gt)
				} else {
					fail("tools_kwargs.%s has no ground_truth", name)
				}
			}
		}
		if sol, ok := ex.ExtraInfo["answer"].(string); ok {
			_, final, found := strings.Cut(sol, "####")
			if !found {
				fail("extra_info.answer %q has no ####", sol)
			}
			answers = append(answers, final)
		}
		for _, a := range answers {
			got, ok := parseRat(a)
			switch {
			case !ok:
				fail("answer %q is not a number", a)
			case got.Cmp(want) != 0:
				fail("answer %s, but the question's answer is %s", a, want.RatString())
			}
		}
		return errors.Join(errs...)
	}
	if k, ok := questionOf(noAnswerQuestions, q); ok {
		if answers, _ := ex.RewardModel.GroundTruth.Answers(); len(answers) > 0 {
			fail("%s, yet it has answers %q", noAnswerQuestions[k], answers)
		}
		return errors.Join(errs...)
	}
	tc, err := ex.Tests()
	if err != nil {
		fail("neither a known math question nor code tests: %v", err)
		return errors.Join(errs...)
	}
	switch {
	case tc.TestCode != "":
		k, ok := questionOf(assertSolutions, q)
		if !ok {
			fail("no solution to check the asserts against")
			break
		}
		n := 0
		for line := range strings.SplitSeq(tc.TestCode, "\n") {
			if !strings.Contains(line, "assert") {
				continue
			}
			n++
			m := assertCall.FindStringSubmatch(line)
			if m == nil {
				fail("an assert this check cannot read: %q", line)
				continue
			}
			x, _ := strconv.ParseInt(m[1], 10, 64)
			y, _ := strconv.ParseInt(m[2], 10, 64)
			if got := assertSolutions[k](x); got != y {
				fail("%s, but candidate(%d) is %d", strings.TrimSpace(line), x, got)
			}
		}
		if n == 0 {
			fail("no asserts")
		}
	case tc.FnName != "":
		k, ok := questionOf(callSolutions, q)
		if !ok || len(tc.Cases) == 0 {
			fail("no solution to run the tests on, or no tests")
			break
		}
		for _, c := range tc.Cases {
			got, err := callSolutions[k](c.Input)
			var want any
			if err == nil {
				err = json.Unmarshal([]byte(c.Output), &want)
			}
			switch {
			case err != nil:
				fail("test %q → %q: %v", c.Input, c.Output, err)
			case !reflect.DeepEqual(got, want):
				fail("%s(%q) is %v, the test says %s", tc.FnName, c.Input, got, c.Output)
			}
		}
	default:
		k, ok := questionOf(stdinSolutions, q)
		if !ok || len(tc.Cases) == 0 {
			fail("no solution to run the tests on, or no tests")
			break
		}
		for _, c := range tc.Cases {
			got, err := stdinSolutions[k](c.Input)
			switch {
			case err != nil:
				fail("test %q: %v", c.Input, err)
			case got != c.Output:
				fail("input %q gives %q, the test says %q", c.Input, got, c.Output)
			}
		}
	}
	return errors.Join(errs...)
}

// conversationChecks check the facts in each SFT conversation, keyed by
// its first user message.
var conversationChecks = map[string]func(msgs []tokenizer.Message) error{
	"Compute 123*456.": func(msgs []tokenizer.Message) error {
		p := new(big.Int).Mul(big.NewInt(123), big.NewInt(456)).String()
		return expectTurns(msgs, map[int]string{1: `{"code":"print(123*456)"}`, 2: p, 3: `\boxed{` + p + `}`})
	},
	"What is 2+2?": func(msgs []tokenizer.Message) error {
		return expectTurns(msgs, map[int]string{1: strconv.Itoa(2 + 2), 2: "And 3+3?", 3: strconv.Itoa(3 + 3)})
	},
	"Is 97 prime?": func(msgs []tokenizer.Message) error {
		prime := true
		for d := 2; d*d <= 97; d++ {
			prime = prime && 97%d != 0
		}
		verdict := map[bool]string{true: "True", false: "False"}[prime]
		yes := map[bool]string{true: "Yes, 97 is prime.", false: "No"}[prime]
		return expectTurns(msgs, map[int]string{1: "sympy.isprime(97)", 2: verdict, 3: yes})
	},
	// 2³ by calc's pow, √16 by its sqrt (a float: "4.0"), then the sum.
	"Combien font 2³ + √16 ?": func(msgs []tokenizer.Message) error {
		p, r := pow(2, 3).Int64(), math.Sqrt(16)
		return expectTurns(msgs, map[int]string{
			1: `{"op":"pow","b":3,"a":2}`, 2: strconv.FormatInt(p, 10), 3: strconv.FormatFloat(r, 'f', 1, 64),
			4: fmt.Sprintf("%d + %g = %g", p, r, float64(p)+r),
		})
	},
	"Run it.": func(msgs []tokenizer.Message) error {
		return expectTurns(msgs, map[int]string{1: `"print(1)"`, 2: "1", 3: "It printed 1."})
	},
	"Say OK.": func(msgs []tokenizer.Message) error { return expectTurns(msgs, map[int]string{1: "OK"}) },
	// In combining marks (NFD), as asked.
	"Write cafe\u0301 with an accent.": func(msgs []tokenizer.Message) error {
		return expectTurns(msgs, map[int]string{1: "cafe\u0301"})
	},
	"Hi!": nil, // a greeting: nothing to derive
}

// expectTurns checks that message i (counted after the system message)
// contains want[i], in its content (a tool's result) or its tool calls'
// arguments (as compact JSON).
func expectTurns(msgs []tokenizer.Message, want map[int]string) error {
	if len(msgs) > 0 && msgs[0].Role == "system" {
		msgs = msgs[1:]
	}
	var errs []error
	for i, w := range want {
		if i >= len(msgs) {
			errs = append(errs, fmt.Errorf("no message %d", i))
			continue
		}
		m := msgs[i]
		text := m.Content
		for _, c := range m.ToolCalls {
			// An object, or a string holding one: compact either way.
			args := []byte(c.Function.Arguments)
			var s string
			if json.Unmarshal(args, &s) == nil {
				args = []byte(s)
			}
			var b bytes.Buffer
			if err := json.Compact(&b, args); err == nil {
				args = b.Bytes()
			}
			text += "\n" + string(args)
		}
		if !strings.Contains(text, w) {
			errs = append(errs, fmt.Errorf("message %d (%s) %q does not say %q", i, m.Role, text, w))
		}
	}
	return errors.Join(errs...)
}

// checkConversation checks one SFT conversation's facts.
func checkConversation(c dataset.Conversation) error {
	first := ""
	for _, m := range c.Messages {
		if m.Role == "user" {
			first = m.Content
			break
		}
	}
	k, ok := questionOf(conversationChecks, first)
	if !ok {
		return fmt.Errorf("row %d: conversation %.60q has no check", c.Row, first)
	}
	if check := conversationChecks[k]; check != nil {
		if err := check(c.Messages); err != nil {
			return fmt.Errorf("row %d (%.60q): %w", c.Row, first, err)
		}
	}
	return nil
}

// TestShippedAnswersChecks: the checks catch a wrong answer, a wrong code
// test and an unknown question.
func TestShippedAnswersChecks(t *testing.T) {
	q := []dataset.Message{{Role: "user", Content: "What is 2**64 - 1? Use the code tool."}}
	for _, c := range []struct {
		name string
		ex   dataset.Example
	}{
		{"2**64 for 2**64 - 1", dataset.Example{Prompt: q, RewardModel: dataset.RewardModel{GroundTruth: dataset.GroundTruth{Kind: dataset.GroundTruthString, Value: "18446744073709551616"}}}},
		{"a wrong worked solution", dataset.Example{Prompt: q, RewardModel: dataset.RewardModel{GroundTruth: dataset.GroundTruth{Kind: dataset.GroundTruthString, Value: "18446744073709551615"}},
			ExtraInfo: map[string]any{"answer": "so #### 18446744073709551614"}}},
		{"a wrong test output", dataset.Example{Prompt: []dataset.Message{{Role: "user", Content: "Add two numbers."}},
			RewardModel: dataset.RewardModel{GroundTruth: dataset.GroundTruth{Kind: dataset.GroundTruthString, Value: `{"inputs": ["1 2\n"], "outputs": ["4\n"]}`}}}},
		{"an unknown question", dataset.Example{Prompt: []dataset.Message{{Role: "user", Content: "What is 1+1?"}},
			RewardModel: dataset.RewardModel{GroundTruth: dataset.GroundTruth{Kind: dataset.GroundTruthString, Value: "2"}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := checkExample(c.ex)
			assert.Error(t, err)
			t.Log(err)
		})
	}
	assert.Error(t, checkConversation(dataset.Conversation{Messages: []tokenizer.Message{
		{Role: "user", Content: "What is 2+2?"}, {Role: "assistant", Content: "5"}, {Role: "user", Content: "And 3+3?"}, {Role: "assistant", Content: "6"},
	}}))
	assert.Error(t, checkConversation(dataset.Conversation{Messages: []tokenizer.Message{{Role: "user", Content: "What is 1+1?"}}}))
}
