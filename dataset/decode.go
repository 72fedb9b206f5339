package dataset

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Options tune how rows are turned into Examples. The zero value reads
// verl's layout: the prompt is a message list under "prompt", and JSONL
// lines are bounded at 64 MiB.
type Options struct {
	// PromptKey is the field that holds the prompt (verl's data.prompt_key);
	// "" means "prompt".
	PromptKey string
	// StringPrompt accepts a prompt that is a plain string and makes it one
	// user message (raw sets such as Open-AgentRL's LiveCodeBench file keep
	// the problem text in a string column). Without it a string prompt is
	// an error, as in verl.
	StringPrompt bool
	// MaxLineBytes bounds one JSONL line; 0 (or negative) means 64 MiB.
	MaxLineBytes int
}

func (o Options) promptKey() string {
	if o.PromptKey == "" {
		return "prompt"
	}
	return o.PromptKey
}

// fieldError is a decoding error at a field path inside one row; readers add
// the file and row.
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return e.field + ": " + e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

func malformed(field, format string, args ...any) error {
	return &fieldError{field: field, err: fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)}
}

// rowError turns an error from decodeRecord into a RowError.
func rowError(file string, row, line int64, err error) error {
	var fe *fieldError
	if errors.As(err, &fe) {
		return &RowError{File: file, Row: row, Line: line, Field: fe.field, Err: fe.err}
	}
	return &RowError{File: file, Row: row, Line: line, Err: err}
}

// decodeRecord turns one record, already in the generic value model, into an
// Example. Errors are *fieldError values.
func decodeRecord(rec map[string]any, opts Options) (Example, error) {
	var ex Example
	pk := opts.promptKey()
	v, ok := rec[pk]
	if !ok {
		return Example{}, malformed(pk, "missing (%s)", fieldsOf(rec))
	}
	var err error
	if ex.Prompt, err = decodePrompt(pk, v, opts.StringPrompt); err != nil {
		return Example{}, err
	}
	// Known fields in a fixed order, so that a row with several faults
	// always reports the same one.
	if ex.DataSource, err = optString("data_source", rec["data_source"]); err != nil {
		return Example{}, err
	}
	if ex.Ability, err = optString("ability", rec["ability"]); err != nil {
		return Example{}, err
	}
	if ex.AgentName, err = optString("agent_name", rec["agent_name"]); err != nil {
		return Example{}, err
	}
	if ex.RewardModel, err = decodeRewardModel(rec["reward_model"]); err != nil {
		return Example{}, err
	}
	if ex.ExtraInfo, err = optObject("extra_info", rec["extra_info"]); err != nil {
		return Example{}, err
	}
	for key, v := range rec {
		switch key {
		case pk, "data_source", "ability", "agent_name", "reward_model", "extra_info":
			continue
		}
		if ex.Extra == nil {
			ex.Extra = make(map[string]any)
		}
		ex.Extra[key] = v
	}
	return ex, nil
}

func decodePrompt(field string, v any, allowString bool) ([]Message, error) {
	switch x := v.(type) {
	case []any:
		if len(x) == 0 {
			return nil, malformed(field, "empty prompt")
		}
		msgs := make([]Message, len(x))
		for i, m := range x {
			path := field + "[" + strconv.Itoa(i) + "]"
			obj, ok := m.(map[string]any)
			if !ok {
				return nil, malformed(path, "want message object, got %s", typeName(m))
			}
			msg, err := decodeMessage(path, obj)
			if err != nil {
				return nil, err
			}
			msgs[i] = msg
		}
		return msgs, nil
	case string:
		if allowString {
			return []Message{{Role: "user", Content: x}}, nil
		}
	case nil:
		return nil, malformed(field, "null prompt")
	}
	return nil, malformed(field, "want list of messages, got %s", typeName(v))
}

func decodeMessage(path string, obj map[string]any) (Message, error) {
	var msg Message
	role, ok := obj["role"]
	if !ok {
		return Message{}, malformed(path+".role", "missing")
	}
	r, isString := role.(string)
	if !isString || r == "" {
		return Message{}, malformed(path+".role", "want non-empty string, got %s", describe(role))
	}
	msg.Role = r
	content, ok := obj["content"]
	if !ok {
		return Message{}, malformed(path+".content", "missing")
	}
	c, isString := content.(string)
	switch {
	case isString:
		msg.Content = c
	case content == nil && obj["tool_calls"] != nil:
		// An assistant turn that only calls tools (OpenAI's layout).
	default:
		return Message{}, malformed(path+".content", "want string, got %s", typeName(content))
	}
	for k, v := range obj {
		if k == "role" || k == "content" {
			continue
		}
		if msg.Extra == nil {
			msg.Extra = make(map[string]any)
		}
		msg.Extra[k] = v
	}
	return msg, nil
}

func decodeRewardModel(v any) (RewardModel, error) {
	const field = "reward_model"
	obj, err := optObject(field, v)
	if err != nil || obj == nil {
		return RewardModel{}, err
	}
	var rm RewardModel
	if rm.GroundTruth, err = decodeGroundTruth(field+".ground_truth", obj["ground_truth"]); err != nil {
		return RewardModel{}, err
	}
	if rm.Style, err = optString(field+".style", obj["style"]); err != nil {
		return RewardModel{}, err
	}
	for k, x := range obj {
		if k == "ground_truth" || k == "style" {
			continue
		}
		if rm.Extra == nil {
			rm.Extra = make(map[string]any)
		}
		rm.Extra[k] = x
	}
	return rm, nil
}

func decodeGroundTruth(field string, v any) (GroundTruth, error) {
	switch x := v.(type) {
	case nil:
		return GroundTruth{}, nil
	case string:
		return GroundTruth{Kind: GroundTruthString, Value: x}, nil
	case int64:
		return GroundTruth{Kind: GroundTruthNumber, Value: x}, nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return GroundTruth{}, malformed(field, "non-finite number %v", x)
		}
		return GroundTruth{Kind: GroundTruthNumber, Value: x}, nil
	case []any:
		return GroundTruth{Kind: GroundTruthList, Value: x}, nil
	case map[string]any:
		return GroundTruth{Kind: GroundTruthObject, Value: x}, nil
	}
	return GroundTruth{}, malformed(field, "want string, number, list or object, got %s", typeName(v))
}

func optString(field string, v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	}
	return "", malformed(field, "want string, got %s", typeName(v))
}

// optObject accepts an object, null, or a string holding a JSON object (the
// way Open-AgentRL's code sets store reward_model and extra_info).
func optObject(field string, v any) (map[string]any, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return x, nil
	case string:
		parsed, err := parseJSON([]byte(x))
		if err != nil {
			return nil, malformed(field, "string is not JSON: %v", err)
		}
		obj, ok := parsed.(map[string]any)
		if !ok {
			return nil, malformed(field, "want object, got JSON %s", typeName(parsed))
		}
		return obj, nil
	}
	return nil, malformed(field, "want object, got %s", typeName(v))
}

// parseJSON decodes exactly one JSON value into the generic value model.
func parseJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON value")
	}
	return normalizeJSON(v)
}

// normalizeJSON replaces json.Number by int64 (integers that fit) or float64.
func normalizeJSON(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i, nil
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return nil, fmt.Errorf("number %s: %w", x, err)
		}
		return f, nil
	case []any:
		for i := range x {
			n, err := normalizeJSON(x[i])
			if err != nil {
				return nil, err
			}
			x[i] = n
		}
	case map[string]any:
		for k, e := range x {
			n, err := normalizeJSON(e)
			if err != nil {
				return nil, err
			}
			x[k] = n
		}
	}
	return v, nil
}

// typeName names a generic value's type in error messages.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "bool"
	case int64:
		return "int64"
	case float64:
		return "float64"
	case []any:
		return "list"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func describe(v any) string {
	if s, ok := v.(string); ok && s == "" {
		return "empty string"
	}
	return typeName(v)
}

// fieldsOf names the keys of a row whose prompt field is missing, so that
// the error shows what the row does hold: "the row has a, b" or "the row
// is empty".
func fieldsOf[V any](rec map[string]V) string {
	if len(rec) == 0 {
		return "the row is empty"
	}
	return "the row has " + strings.Join(slices.Sorted(maps.Keys(rec)), ", ")
}
