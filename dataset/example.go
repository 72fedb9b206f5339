package dataset

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Example is one prompt of an RL data set in verl's layout (the rows that
// verl's examples/data_preprocess scripts write and verl.utils.dataset.RLHFDataset
// reads): a chat prompt, the data source that selects the reward function, the
// reward model's ground truth, and free-form extra_info.
//
// Nothing of the source row is lost: fields the type does not name are kept in
// Extra (top level), Message.Extra and RewardModel.Extra, as generic values (see
// the package documentation of the value model: nil, bool, int64, float64,
// string, []any, map[string]any).
type Example struct {
	// Source names where the example was read from (the file name given to
	// the reader), and Row is its 0-based position there (row number across
	// row groups for parquet, record number for JSONL).
	Source string
	Row    int64

	// DataSource is verl's data_source: it selects the reward function
	// (e.g. "openai/gsm8k", "math_dapo", "LiveCodeBench_v6").
	DataSource string
	// Prompt is the chat prompt, in order.
	Prompt []Message
	// Ability is verl's ability tag ("math", "code", ...).
	Ability string
	// RewardModel holds the ground truth and the reward style.
	RewardModel RewardModel
	// ExtraInfo is verl's extra_info: split, index, and tool settings such
	// as need_tools_kwargs, tools_kwargs and interaction_kwargs. A JSON
	// string in the source (Open-AgentRL's code sets) is decoded.
	ExtraInfo map[string]any
	// AgentName is verl's agent_name column (e.g. "tool_agent"), empty when absent.
	AgentName string
	// Extra holds every other top-level field of the row.
	Extra map[string]any
}

// Message is one chat message of a prompt.
type Message struct {
	Role    string
	Content string
	// Extra holds the message's other keys (tool_calls, name,
	// reasoning_content, tool_call_id ...).
	Extra map[string]any
}

// RewardModel is verl's reward_model column.
type RewardModel struct {
	// Style is "rule" or "model" in verl's preprocessing scripts.
	Style string
	// GroundTruth is the reference answer or the code tests.
	GroundTruth GroundTruth
	// Extra holds the column's other keys.
	Extra map[string]any
}

// GroundTruthKind says which shape a ground truth has.
type GroundTruthKind int

// The shapes a ground truth takes in verl and Open-AgentRL data.
const (
	// GroundTruthNone: the field is absent or null.
	GroundTruthNone GroundTruthKind = iota
	// GroundTruthString: a string, e.g. "72" (gsm8k), "\\frac{1}{2}" (math),
	// or a JSON document that encodes code tests.
	GroundTruthString
	// GroundTruthNumber: an integer or a float.
	GroundTruthNumber
	// GroundTruthList: a list of acceptable answers (math_verify accepts any).
	GroundTruthList
	// GroundTruthObject: an object, e.g. code tests {inputs, outputs, fn_name}.
	GroundTruthObject
)

// String names the kind.
func (k GroundTruthKind) String() string {
	switch k {
	case GroundTruthNone:
		return "none"
	case GroundTruthString:
		return "string"
	case GroundTruthNumber:
		return "number"
	case GroundTruthList:
		return "list"
	case GroundTruthObject:
		return "object"
	}
	return "GroundTruthKind(" + strconv.Itoa(int(k)) + ")"
}

// GroundTruth is a reference answer in whichever shape the data set stores it.
type GroundTruth struct {
	Kind GroundTruthKind
	// Value is the ground truth as a generic value: string, int64 or
	// float64, []any, or map[string]any; nil for GroundTruthNone.
	Value any
}

// Answers returns the acceptable answers as text, the form math verifiers
// take: a string gives itself; a number its shortest decimal form (an int64
// as Python's str gives it; a float64 in Go's shortest 'g' form, so 5.0 gives
// "5" where Python gives "5.0"); a list each element (strings or numbers).
// An object or an empty ground truth is an error.
func (g GroundTruth) Answers() ([]string, error) {
	switch g.Kind {
	case GroundTruthString, GroundTruthNumber:
		s, err := scalarText(g.Value)
		if err != nil {
			return nil, err
		}
		return []string{s}, nil
	case GroundTruthList:
		list := g.Value.([]any)
		out := make([]string, 0, len(list))
		for i, v := range list {
			s, err := scalarText(v)
			if err != nil {
				return nil, fmt.Errorf("ground_truth[%d]: %w", i, err)
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: ground truth is %s, not an answer", ErrMalformed, g.Kind)
}

func scalarText(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	}
	return "", fmt.Errorf("%w: want string or number, got %s", ErrMalformed, typeName(v))
}

// Sentinel errors. Every decoding error wraps ErrMalformed (a row or a line
// that does not have verl's shape) or ErrCorruptFile (a file the parquet or
// JSON layer cannot read), so that callers can tell bad data from I/O errors.
var (
	// ErrMalformed marks a row whose content does not fit the layout.
	ErrMalformed = errors.New("dataset: malformed row")
	// ErrCorruptFile marks a file that cannot be decoded (bad magic,
	// truncated footer or page, a panic inside the parquet library).
	ErrCorruptFile = errors.New("dataset: corrupt file")
	// ErrNoTests is returned by Example.Tests when no code tests are found.
	ErrNoTests = errors.New("dataset: no test cases")
)

// RowError names where a decoding error happened: the file, the row (0-based;
// for JSONL also the 1-based line) and the field path, e.g.
// "train.parquet: row 12: dataset: malformed row: field prompt[1].content:
// want string, got int64".
type RowError struct {
	File  string
	Row   int64 // 0-based row, -1 when the error is not tied to a row
	Line  int64 // 1-based line of a JSONL file, 0 for parquet
	Field string
	Err   error
}

// Error formats the place, the kind of fault, the field and the cause:
// "file: row N: dataset: malformed row: field F: cause", or
// "file:LINE: …" for JSONL; without a field, "file: row N: cause".
func (e *RowError) Error() string {
	s := e.File
	switch {
	case e.Line > 0:
		s += ":" + strconv.FormatInt(e.Line, 10)
	case e.Row >= 0:
		s += ": row " + strconv.FormatInt(e.Row, 10)
	}
	return s + ": " + withField(e.Err, e.Field)
}

// withField is err's text with "field F" after its kind (ErrMalformed or
// ErrCorruptFile, whose text leads it) and before the rest.
func withField(err error, field string) string {
	cause := err.Error()
	if field == "" {
		return cause
	}
	for _, kind := range []error{ErrMalformed, ErrCorruptFile} {
		if rest, ok := strings.CutPrefix(cause, kind.Error()); ok && errors.Is(err, kind) {
			if rest = strings.TrimPrefix(rest, ": "); rest == "" {
				return kind.Error() + ": field " + field
			}
			return kind.Error() + ": field " + field + ": " + rest
		}
	}
	return "field " + field + ": " + cause
}

// Unwrap returns the cause, so that errors.Is finds ErrMalformed and
// ErrCorruptFile.
func (e *RowError) Unwrap() error { return e.Err }

// ToolsKwargs returns extra_info.tools_kwargs: for each tool name, the
// keyword arguments verl's tool agent loop hands to that tool
// (create_kwargs, execute_kwargs, calc_reward_kwargs, release_kwargs). It is
// nil when the row has none.
func (e Example) ToolsKwargs() (map[string]map[string]any, error) {
	v, ok := e.ExtraInfo["tools_kwargs"]
	if !ok || v == nil {
		return nil, nil
	}
	obj, err := optObject("extra_info.tools_kwargs", v)
	if err != nil {
		return nil, rowError(e.Source, e.Row, 0, err)
	}
	out := make(map[string]map[string]any, len(obj))
	for name, kw := range obj {
		m, err := optObject("extra_info.tools_kwargs."+name, kw)
		if err != nil {
			return nil, rowError(e.Source, e.Row, 0, err)
		}
		out[name] = m
	}
	return out, nil
}
