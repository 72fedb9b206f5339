package dataset

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseTestCases(t *testing.T) {
	cases := []struct {
		name string
		in   any
		want TestCases
		err  string // substring of the error; "" for success
	}{
		{"stdin json string", `{"inputs": ["1\n"], "outputs": ["2\n"]}`, TestCases{Cases: []TestCase{{"1\n", "2\n"}}}, ""},
		{"leading space json", "  \n{\"inputs\": [], \"outputs\": []}", TestCases{Cases: []TestCase{}}, ""},
		{"call based object", map[string]any{"inputs": []any{[]any{int64(1), int64(2)}}, "outputs": []any{int64(3)}, "fn_name": "add"},
			TestCases{FnName: "add", Cases: []TestCase{{"[1,2]", "3"}}}, ""},
		{"null fn_name", map[string]any{"inputs": []any{"a"}, "outputs": []any{"b"}, "fn_name": nil}, TestCases{Cases: []TestCase{{"a", "b"}}}, ""},
		{"float output", `{"inputs": ["x"], "outputs": [0.5]}`, TestCases{Cases: []TestCase{{"x", "0.5"}}}, ""},
		{"list of tests", `[{"input": "a", "output": "b", "testtype": "stdin"}, {"input": "c", "output": "d"}]`,
			TestCases{Cases: []TestCase{{"a", "b"}, {"c", "d"}}}, ""},
		{"assert style", map[string]any{"test_code": "def check(c): assert c(1) == 1", "entry_point": "f"},
			TestCases{TestCode: "def check(c): assert c(1) == 1", EntryPoint: "f"}, ""},

		{"length mismatch", `{"inputs": ["1", "2"], "outputs": ["1"]}`, TestCases{}, "tests: dataset: malformed row: 2 inputs but 1 outputs"},
		{"inputs not list", `{"inputs": "1", "outputs": ["1"]}`, TestCases{}, "tests.inputs: dataset: malformed row: want list, got string"},
		{"missing outputs", `{"inputs": ["1"]}`, TestCases{}, "tests.outputs: dataset: malformed row: want list, got null"},
		{"fn_name number", `{"inputs": [], "outputs": [], "fn_name": 3}`, TestCases{}, "tests.fn_name"},
		{"null input", `{"inputs": [null], "outputs": ["1"]}`, TestCases{}, "tests.inputs[0]: dataset: malformed row: null test value"},
		{"list entry missing output", `[{"input": "a", "output": "b"}, {"input": "c"}]`, TestCases{}, "tests[1].output: dataset: malformed row: missing"},
		{"list entry not object", `[{"input": "a", "output": "b"}, 7]`, TestCases{}, "tests[1]: dataset: malformed row: want test object, got int64"},
		{"empty test_code", map[string]any{"test_code": ""}, TestCases{}, "tests.test_code"},
		{"entry_point list", map[string]any{"test_code": "x", "entry_point": []any{}}, TestCases{}, "tests.entry_point"},

		{"plain answer", "72", TestCases{}, "no test cases"},
		{"interval answer", "[0, 1)", TestCases{}, "no test cases"},
		{"number", int64(3), TestCases{}, "no test cases"},
		{"list of answers", []any{"1", "2"}, TestCases{}, "no test cases"},
		{"object without tests", map[string]any{"answer": "1"}, TestCases{}, "no test cases"},
		{"nil", nil, TestCases{}, "no test cases"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseTestCases(c.in)
			if c.err != "" {
				assert.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
}

func TestExampleTestsLookupOrder(t *testing.T) {
	io := map[string]any{"inputs": []any{"i"}, "outputs": []any{"o"}}
	// ground_truth wins over extra_info.
	ex := Example{
		RewardModel: RewardModel{GroundTruth: GroundTruth{Kind: GroundTruthString, Value: `{"inputs": ["g"], "outputs": ["h"]}`}},
		ExtraInfo:   map[string]any{"test_cases": io},
	}
	tc, err := ex.Tests()
	require.NoError(t, err)
	assert.Equal(t, []TestCase{{"g", "h"}}, tc.Cases)

	// test_cases before tests before input_output.
	ex = Example{ExtraInfo: map[string]any{"input_output": `{"inputs": ["c"], "outputs": ["d"]}`, "tests": io}}
	tc, err = ex.Tests()
	require.NoError(t, err)
	assert.Equal(t, []TestCase{{"i", "o"}}, tc.Cases)

	// A broken test layout is reported with its place, not skipped.
	ex = Example{Source: "f.parquet", Row: 9, ExtraInfo: map[string]any{"tests": `{"inputs": ["a"], "outputs": []}`}}
	_, err = ex.Tests()
	var re *RowError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, "extra_info.tests", re.Field)
	assert.EqualError(t, err, "f.parquet: row 9: dataset: malformed row: field extra_info.tests: 1 inputs but 0 outputs")

	ex = Example{Source: "f.parquet", Row: 2, RewardModel: RewardModel{GroundTruth: GroundTruth{Kind: GroundTruthString, Value: "5"}}}
	_, err = ex.Tests()
	assert.ErrorIs(t, err, ErrNoTests)
	assert.EqualError(t, err, "f.parquet: row 2: dataset: no test cases")
}

func TestGroundTruthAnswers(t *testing.T) {
	cases := []struct {
		gt   GroundTruth
		want []string
		err  string
	}{
		{GroundTruth{Kind: GroundTruthString, Value: `\frac{1}{2}`}, []string{`\frac{1}{2}`}, ""},
		{GroundTruth{Kind: GroundTruthNumber, Value: int64(-17)}, []string{"-17"}, ""},
		{GroundTruth{Kind: GroundTruthNumber, Value: 5.0}, []string{"5"}, ""},
		{GroundTruth{Kind: GroundTruthNumber, Value: 1e21}, []string{"1e+21"}, ""},
		{GroundTruth{Kind: GroundTruthList, Value: []any{"a", int64(1), 0.25}}, []string{"a", "1", "0.25"}, ""},
		{GroundTruth{Kind: GroundTruthList, Value: []any{"a", []any{}}}, nil, "ground_truth[1]: dataset: malformed row: want string or number, got list"},
		{GroundTruth{Kind: GroundTruthObject, Value: map[string]any{}}, nil, "ground truth is object, not an answer"},
		{GroundTruth{}, nil, "ground truth is none"},
	}
	for _, c := range cases {
		got, err := c.gt.Answers()
		if c.err != "" {
			assert.ErrorContains(t, err, c.err)
			assert.ErrorIs(t, err, ErrMalformed)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, c.want, got)
	}
	assert.Equal(t, "list", GroundTruthList.String())
	assert.Equal(t, "GroundTruthKind(9)", GroundTruthKind(9).String())
}

func TestGroundTruthNonFinite(t *testing.T) {
	_, err := decodeGroundTruth("reward_model.ground_truth", mathNaN())
	assert.ErrorContains(t, err, "reward_model.ground_truth: dataset: malformed row: non-finite number NaN")
}

func mathNaN() float64 { return math.NaN() }
