package dataset

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentrl/agentrl/policy/tokenizer"
)

// SFTOptions say where a row keeps its conversation. The zero value reads
// verl's multi-turn layout (and TRL's): "messages" and "tools", with
// JSONL lines bounded at 64 MiB.
type SFTOptions struct {
	// MessagesKey is the field of the message list (verl's
	// data.multiturn.messages_key); "" means "messages".
	MessagesKey string
	// ToolsKey is the field of the tool schemas (verl's
	// data.multiturn.tools_key); "" means "tools". The field may be
	// absent or null, a list of objects, or a string holding that list as
	// JSON.
	ToolsKey string
	// MaxLineBytes bounds one JSONL line; 0 (or negative) means 64 MiB.
	MaxLineBytes int
}

func (o SFTOptions) keys() (messages, tools string) {
	messages, tools = o.MessagesKey, o.ToolsKey
	if messages == "" {
		messages = "messages"
	}
	if tools == "" {
		tools = "tools"
	}
	return messages, tools
}

// SFTReader yields Conversations one at a time; Next returns io.EOF after
// the last.
type SFTReader interface {
	Next(ctx context.Context) (Conversation, error)
	Close() error
}

// SFTJSONLReader reads conversations from JSON Lines, one object per line
// with a messages list and optional tools (TRL's conversational layout and
// the rows of verl's multi-turn SFT parquet files).
//
// A message has a role (required string), content (string; null or absent
// is ""), and optionally reasoning_content (string or null), tool_calls (a
// list of {"id", "type": "function", "function": {"name", "arguments"}} or
// of the flat {"name", "arguments"}; arguments a JSON object, kept byte for
// byte with its key order, or a JSON string), name and tool_call_id. Other
// message keys are ignored: the chat template does not see them. Content
// given as a list of parts is an error (templates for text models take
// strings).
//
// A bad line gives a *RowError (wrapping ErrMalformed) that names the line
// and the field; Next then goes on with the next line.
type SFTJSONLReader struct {
	lines *JSONLReader
	opts  SFTOptions
}

// NewSFTJSONLReader reads JSON Lines conversations from r; name labels
// errors and Conversation.Source.
func NewSFTJSONLReader(r io.Reader, name string, opts SFTOptions) *SFTJSONLReader {
	return &SFTJSONLReader{lines: NewJSONLReader(r, name, Options{MaxLineBytes: opts.MaxLineBytes}), opts: opts}
}

// Next returns the next conversation, or io.EOF after the last one.
func (s *SFTJSONLReader) Next(ctx context.Context) (Conversation, error) {
	j := s.lines
	if j.err != nil {
		return Conversation{}, j.err
	}
	if err := ctx.Err(); err != nil {
		return Conversation{}, err
	}
	maxLen := s.opts.MaxLineBytes
	if maxLen <= 0 {
		maxLen = defaultMaxLineBytes
	}
	for {
		line, err := j.readLine(maxLen)
		if err != nil {
			j.err = err
			return Conversation{}, err
		}
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) == 0 {
			continue
		}
		row := j.row
		j.row++
		conv, err := decodeSFTLine(trimmed, s.opts)
		if err != nil {
			return Conversation{}, rowError(j.name, row, j.line, err)
		}
		conv.Source, conv.Row = j.name, row
		return conv, nil
	}
}

// Close closes the file opened by OpenSFT.
func (s *SFTJSONLReader) Close() error { return s.lines.Close() }

// SFTParquetReader reads conversations from a parquet file with a messages
// column (LIST<STRUCT<role, content, ...>>) and an optional tools column, the
// layout of verl's multi-turn SFT data and Open-AgentRL's SFT set
// (Gen-Verse/Open-AgentRL-SFT-3K). Struct values (tool-call arguments
// stored as structs, tool schemas) reach the template with their keys in
// sorted order, not the file's field order, and — as pyarrow gives them — with
// every field of the column's struct type, null where a row had none; data
// that needs its own order or keys should store them as JSON strings (as
// the tools column usually is).
type SFTParquetReader struct {
	pr   *ParquetReader
	opts SFTOptions
}

// Next returns the next conversation, or io.EOF after the last one.
func (s *SFTParquetReader) Next(ctx context.Context) (Conversation, error) {
	ex, err := s.pr.Next(ctx)
	if err != nil {
		return Conversation{}, err
	}
	conv, err := conversationFromExample(ex, s.opts)
	if err != nil {
		return Conversation{}, rowError(ex.Source, ex.Row, 0, err)
	}
	return conv, nil
}

// Close closes the file.
func (s *SFTParquetReader) Close() error { return s.pr.Close() }

// conversationFromExample re-reads a row decoded by the parquet reader
// (messages read as the prompt) through the JSON path, so that both formats
// follow one set of rules.
func conversationFromExample(ex Example, opts SFTOptions) (Conversation, error) {
	mk, _ := opts.keys()
	rec := ex.Record()
	rec[mk] = rec["prompt"]
	if mk != "prompt" {
		delete(rec, "prompt")
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return Conversation{}, malformed(mk, "%v", err)
	}
	conv, err := decodeSFTLine(b, opts)
	if err != nil {
		return Conversation{}, err
	}
	conv.Source, conv.Row = ex.Source, ex.Row
	return conv, nil
}

// OpenSFT opens a conversation file by its extension: ".parquet", or
// ".jsonl" / ".ndjson".
func OpenSFT(path string, opts SFTOptions) (SFTReader, error) {
	mk, _ := opts.keys()
	switch strings.ToLower(filepath.Ext(path)) {
	case ".parquet":
		pr, err := OpenParquet(path, Options{PromptKey: mk, MaxLineBytes: opts.MaxLineBytes})
		if err != nil {
			return nil, err
		}
		return &SFTParquetReader{pr: pr, opts: opts}, nil
	case ".jsonl", ".ndjson":
		jr, err := OpenJSONL(path, Options{MaxLineBytes: opts.MaxLineBytes})
		if err != nil {
			return nil, err
		}
		return &SFTJSONLReader{lines: jr, opts: opts}, nil
	}
	return nil, fmt.Errorf("dataset: %s: unknown extension (want .parquet, .jsonl or .ndjson)", path)
}

// LoadSFT reads every conversation of the given files, in order; the first
// bad row stops it with an error naming the file, row and field.
func LoadSFT(ctx context.Context, opts SFTOptions, paths ...string) ([]Conversation, error) {
	var all []Conversation
	for _, p := range paths {
		r, err := OpenSFT(p, opts)
		if err != nil {
			return nil, err
		}
		for {
			c, err := r.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				r.Close()
				return nil, err
			}
			all = append(all, c)
		}
		if err := r.Close(); err != nil {
			return nil, fmt.Errorf("dataset: %s: %w", p, err)
		}
	}
	return all, nil
}

// decodeSFTLine decodes one JSON object into a Conversation; errors are
// *fieldError values.
func decodeSFTLine(line []byte, opts SFTOptions) (Conversation, error) {
	mk, tk := opts.keys()
	var rec map[string]json.RawMessage
	if err := json.Unmarshal(line, &rec); err != nil {
		return Conversation{}, fmt.Errorf("%w: want a JSON object: %v", ErrMalformed, err)
	}
	if rec == nil {
		return Conversation{}, fmt.Errorf("%w: want a JSON object, got null", ErrMalformed)
	}
	raw, ok := rec[mk]
	if !ok {
		return Conversation{}, malformed(mk, "missing (%s)", fieldsOf(rec))
	}
	if isJSONNull(raw) {
		return Conversation{}, malformed(mk, "null")
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return Conversation{}, malformed(mk, "want a list of messages: %v", jsonKind(raw))
	}
	var conv Conversation
	conv.Messages = make([]tokenizer.Message, len(list))
	for i, m := range list {
		msg, err := decodeSFTMessage(mk+"["+strconv.Itoa(i)+"]", m)
		if err != nil {
			return Conversation{}, err
		}
		conv.Messages[i] = msg
	}
	if raw, ok := rec[tk]; ok && !isJSONNull(raw) {
		tools, err := decodeTools(tk, raw)
		if err != nil {
			return Conversation{}, err
		}
		conv.Tools = tools
	}
	return conv, nil
}

func decodeTools(field string, raw json.RawMessage) ([]json.RawMessage, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil { // a JSON string holding the list
		raw = json.RawMessage(s)
		if !json.Valid(raw) {
			return nil, malformed(field, "string is not JSON")
		}
		if isJSONNull(raw) {
			return nil, nil
		}
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, malformed(field, "want a list of tool schemas, got %s", jsonKind(raw))
	}
	for i, t := range list {
		if jsonKind(t) != "object" {
			return nil, malformed(field+"["+strconv.Itoa(i)+"]", "want an object, got %s", jsonKind(t))
		}
		list[i] = bytes.TrimSpace(t)
	}
	return list, nil
}

func decodeSFTMessage(path string, raw json.RawMessage) (tokenizer.Message, error) {
	var obj map[string]json.RawMessage
	if jsonKind(raw) != "object" || json.Unmarshal(raw, &obj) != nil {
		return tokenizer.Message{}, malformed(path, "want a message object, got %s", jsonKind(raw))
	}
	var m tokenizer.Message
	var err error
	if m.Role, err = jsonString(path+".role", obj["role"], false); err != nil {
		return tokenizer.Message{}, err
	}
	if m.Role == "" {
		return tokenizer.Message{}, malformed(path+".role", "missing or empty")
	}
	if c, ok := obj["content"]; ok && jsonKind(c) == "array" {
		return tokenizer.Message{}, malformed(path+".content", "a list of content parts is not supported; want a string")
	}
	if m.Content, err = jsonString(path+".content", obj["content"], true); err != nil {
		return tokenizer.Message{}, err
	}
	if r, ok := obj["reasoning_content"]; ok && !isJSONNull(r) {
		s, err := jsonString(path+".reasoning_content", r, false)
		if err != nil {
			return tokenizer.Message{}, err
		}
		m.ReasoningContent = &s
	}
	if m.Name, err = jsonString(path+".name", obj["name"], true); err != nil {
		return tokenizer.Message{}, err
	}
	if m.ToolCallID, err = jsonString(path+".tool_call_id", obj["tool_call_id"], true); err != nil {
		return tokenizer.Message{}, err
	}
	if tc, ok := obj["tool_calls"]; ok && !isJSONNull(tc) {
		var calls []json.RawMessage
		if err := json.Unmarshal(tc, &calls); err != nil {
			return tokenizer.Message{}, malformed(path+".tool_calls", "want a list, got %s", jsonKind(tc))
		}
		m.ToolCalls = make([]tokenizer.ToolCall, len(calls))
		for i, c := range calls {
			call, err := decodeToolCall(path+".tool_calls["+strconv.Itoa(i)+"]", c)
			if err != nil {
				return tokenizer.Message{}, err
			}
			m.ToolCalls[i] = call
		}
	}
	return m, nil
}

func decodeToolCall(path string, raw json.RawMessage) (tokenizer.ToolCall, error) {
	var obj map[string]json.RawMessage
	if jsonKind(raw) != "object" || json.Unmarshal(raw, &obj) != nil {
		return tokenizer.ToolCall{}, malformed(path, "want a tool call object, got %s", jsonKind(raw))
	}
	var tc tokenizer.ToolCall
	var err error
	if tc.ID, err = jsonString(path+".id", obj["id"], true); err != nil {
		return tokenizer.ToolCall{}, err
	}
	if tc.Type, err = jsonString(path+".type", obj["type"], true); err != nil {
		return tokenizer.ToolCall{}, err
	}
	if tc.Type != "" && tc.Type != "function" {
		return tokenizer.ToolCall{}, malformed(path+".type", "%q, want \"function\"", tc.Type)
	}
	fn, fpath := obj, path // the flat layout {"name", "arguments"}
	if f, ok := obj["function"]; ok && !isJSONNull(f) {
		fpath = path + ".function"
		fn = nil
		if jsonKind(f) != "object" || json.Unmarshal(f, &fn) != nil {
			return tokenizer.ToolCall{}, malformed(fpath, "want an object, got %s", jsonKind(f))
		}
	}
	if tc.Function.Name, err = jsonString(fpath+".name", fn["name"], false); err != nil {
		return tokenizer.ToolCall{}, err
	}
	if tc.Function.Name == "" {
		return tokenizer.ToolCall{}, malformed(fpath+".name", "missing or empty")
	}
	if a, ok := fn["arguments"]; ok && !isJSONNull(a) {
		switch jsonKind(a) {
		case "object", "string":
			tc.Function.Arguments = json.RawMessage(bytes.TrimSpace(a))
		default:
			return tokenizer.ToolCall{}, malformed(fpath+".arguments", "want an object or a string, got %s", jsonKind(a))
		}
	}
	return tc, nil
}

// jsonString decodes a JSON string; absent (nil) gives "", and so does null
// when nullOK.
func jsonString(field string, raw json.RawMessage, nullOK bool) (string, error) {
	if raw == nil {
		return "", nil
	}
	if isJSONNull(raw) {
		if nullOK {
			return "", nil
		}
		return "", malformed(field, "want a string, got null")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", malformed(field, "want a string, got %s", jsonKind(raw))
	}
	return s, nil
}

func isJSONNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// jsonKind names the kind of a (valid) JSON value by its first byte.
func jsonKind(raw json.RawMessage) string {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number"
}
