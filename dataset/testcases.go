package dataset

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// TestCase is one input and its expected output. A string in the source is
// kept as is (stdin text, or newline-separated JSON arguments in
// LiveCodeBench's call-based tests); any other value is kept as its compact
// JSON encoding.
type TestCase struct {
	Input  string
	Output string
}

// TestCases are the tests a code answer is judged by, in one of the layouts
// that verl's and Open-AgentRL's code sets use:
//
//   - input/output tests: {"inputs": [...], "outputs": [...]} with an
//     optional "fn_name" for call-based problems (LiveCodeBench, APPS/TACO
//     "input_output", PRIME/Skywork code; Open-AgentRL's
//     verl/utils/reward_score/livecodebench/code_math.py reads this form);
//   - a list of {"input": ..., "output": ...} objects (DeepCoder/LiveCodeBench
//     public tests);
//   - assert-style tests: {"test_code": ..., "import_prefix": ...,
//     "entry_point": ...} (LeetCodeDataset; the import_prefix branch of
//     code_math.compute_score).
type TestCases struct {
	Cases []TestCase
	// FnName names the function that call-based tests call; empty for
	// stdin/stdout tests.
	FnName string
	// Assert-style tests: TestCode holds a check function and its asserts,
	// ImportPrefix the imports to put before the solution, EntryPoint the
	// name the check function is given.
	ImportPrefix string
	TestCode     string
	EntryPoint   string
}

// testsInfoKeys are the extra_info keys searched for tests, in order, when
// reward_model.ground_truth holds none.
var testsInfoKeys = [...]string{"test_cases", "tests", "input_output"}

// Tests finds the example's code tests: first in reward_model.ground_truth
// (an object, a list, or a string holding JSON), then in extra_info under
// "test_cases", "tests" and "input_output". It returns ErrNoTests when none
// of them holds tests, and an error naming the field when one holds tests of
// the wrong shape (e.g. inputs and outputs of different lengths).
func (e Example) Tests() (TestCases, error) {
	if tc, found, err := parseTests("reward_model.ground_truth", e.RewardModel.GroundTruth.Value); found || err != nil {
		if err != nil {
			return TestCases{}, rowError(e.Source, e.Row, 0, err)
		}
		return tc, nil
	}
	for _, k := range testsInfoKeys {
		if v, ok := e.ExtraInfo[k]; ok {
			if tc, found, err := parseTests("extra_info."+k, v); found || err != nil {
				if err != nil {
					return TestCases{}, rowError(e.Source, e.Row, 0, err)
				}
				return tc, nil
			}
		}
	}
	return TestCases{}, fmt.Errorf("%s: row %d: %w", e.Source, e.Row, ErrNoTests)
}

// ParseTestCases reads tests from a generic value (an object, a list, or a
// string holding JSON) in any layout TestCases describes.
func ParseTestCases(v any) (TestCases, error) {
	tc, found, err := parseTests("tests", v)
	if err == nil && !found {
		err = ErrNoTests
	}
	return tc, err
}

// parseTests reports found=false when v is not test-shaped at all (e.g. a
// plain answer string), and an error when it is test-shaped but broken.
func parseTests(field string, v any) (TestCases, bool, error) {
	if s, ok := v.(string); ok {
		t := strings.TrimSpace(s)
		if !strings.HasPrefix(t, "{") && !strings.HasPrefix(t, "[") {
			return TestCases{}, false, nil
		}
		parsed, err := parseJSON([]byte(t))
		if err != nil {
			// Brackets that are not JSON: an answer such as "[0, 1)".
			return TestCases{}, false, nil
		}
		v = parsed
	}
	switch x := v.(type) {
	case map[string]any:
		if _, ok := x["test_code"]; ok {
			tc, err := assertTests(field, x)
			return tc, true, err
		}
		_, hasIn := x["inputs"]
		_, hasOut := x["outputs"]
		if !hasIn && !hasOut {
			return TestCases{}, false, nil
		}
		tc, err := ioTests(field, x)
		return tc, true, err
	case []any:
		if len(x) == 0 {
			return TestCases{}, false, nil
		}
		if obj, ok := x[0].(map[string]any); !ok || obj["input"] == nil && obj["output"] == nil {
			return TestCases{}, false, nil
		}
		tc, err := listTests(field, x)
		return tc, true, err
	}
	return TestCases{}, false, nil
}

func ioTests(field string, obj map[string]any) (TestCases, error) {
	ins, ok := obj["inputs"].([]any)
	if !ok {
		return TestCases{}, malformedTests(field+".inputs", "want list, got %s", typeName(obj["inputs"]))
	}
	outs, ok := obj["outputs"].([]any)
	if !ok {
		return TestCases{}, malformedTests(field+".outputs", "want list, got %s", typeName(obj["outputs"]))
	}
	if len(ins) != len(outs) {
		return TestCases{}, malformedTests(field, "%d inputs but %d outputs", len(ins), len(outs))
	}
	var tc TestCases
	if fn, ok := obj["fn_name"]; ok && fn != nil {
		s, isString := fn.(string)
		if !isString {
			return TestCases{}, malformedTests(field+".fn_name", "want string, got %s", typeName(fn))
		}
		tc.FnName = s
	}
	tc.Cases = make([]TestCase, len(ins))
	for i := range ins {
		in, err := caseText(ins[i])
		if err != nil {
			return TestCases{}, malformedTests(field+".inputs["+strconv.Itoa(i)+"]", "%v", err)
		}
		out, err := caseText(outs[i])
		if err != nil {
			return TestCases{}, malformedTests(field+".outputs["+strconv.Itoa(i)+"]", "%v", err)
		}
		tc.Cases[i] = TestCase{Input: in, Output: out}
	}
	return tc, nil
}

func listTests(field string, list []any) (TestCases, error) {
	var tc TestCases
	tc.Cases = make([]TestCase, len(list))
	for i, e := range list {
		path := field + "[" + strconv.Itoa(i) + "]"
		obj, ok := e.(map[string]any)
		if !ok {
			return TestCases{}, malformedTests(path, "want test object, got %s", typeName(e))
		}
		in, ok := obj["input"]
		if !ok {
			return TestCases{}, malformedTests(path+".input", "missing")
		}
		out, ok := obj["output"]
		if !ok {
			return TestCases{}, malformedTests(path+".output", "missing")
		}
		inText, err := caseText(in)
		if err != nil {
			return TestCases{}, malformedTests(path+".input", "%v", err)
		}
		outText, err := caseText(out)
		if err != nil {
			return TestCases{}, malformedTests(path+".output", "%v", err)
		}
		tc.Cases[i] = TestCase{Input: inText, Output: outText}
	}
	return tc, nil
}

func assertTests(field string, obj map[string]any) (TestCases, error) {
	var tc TestCases
	var err error
	code, ok := obj["test_code"].(string)
	if !ok || code == "" {
		return TestCases{}, malformedTests(field+".test_code", "want non-empty string, got %s", describe(obj["test_code"]))
	}
	tc.TestCode = code
	if tc.ImportPrefix, err = optString(field+".import_prefix", obj["import_prefix"]); err != nil {
		return TestCases{}, err
	}
	if tc.EntryPoint, err = optString(field+".entry_point", obj["entry_point"]); err != nil {
		return TestCases{}, err
	}
	return tc, nil
}

func caseText(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case nil:
		return "", fmt.Errorf("null test value")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func malformedTests(field, format string, args ...any) error {
	return malformed(field, format, args...)
}
