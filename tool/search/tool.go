package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentrl/agentrl/internal/pyjson"
	"github.com/agentrl/agentrl/internal/pystr"
	"github.com/agentrl/agentrl/tool"
)

// Format says how a Tool writes its hits for the model.
type Format string

const (
	// FormatVerl is verl's search tool's text
	// (verl/tools/utils/search_r1_like_utils.py, _passages2string and
	// perform_single_search_batch): for each query, each hit as
	// "Doc i (Title: <first line>)\n<rest>\n\n", the whole stripped of
	// white space at both ends; the queries' texts joined by "\n---\n";
	// the result wrapped as json.dumps({"result": text},
	// ensure_ascii=False).
	FormatVerl Format = "verl"
	// FormatSearchR1 is Search-R1's text (search_r1/llm_agent/generation.py,
	// _passages2string; slime's examples/search-r1 writes the same): each
	// hit as "Doc i(Title: <first line>) <rest>\n", unwrapped (Search-R1's
	// own loop puts it between <information> tags). The queries' texts
	// are joined by "\n---\n".
	FormatSearchR1 Format = "search-r1"
)

// DefaultToolName is the function name of verl's search tool.
const DefaultToolName = "search"

// DefaultDescription is verl's search tool's description
// (examples/sglang_multiturn/config/tool_config/search_tool_config.yaml).
const DefaultDescription = "Searches the web for relevant information based on the given query."

// queryListDescription is verl's description of the query_list parameter.
const queryListDescription = "A list of fully-formed semantic queries. The tool will return search results for each query."

// ToolConfig configures a Tool. Zero fields take the default named on
// them.
type ToolConfig struct {
	// Name is the function name; default "search" (verl's).
	Name string
	// Description is the function's description; default verl's
	// (DefaultDescription).
	Description string
	// Format is how hits are written for the model; default FormatVerl.
	Format Format
	// MaxQueries bounds the queries of one call: a call with more gets a
	// failed result saying so; default 16, negative: no bound (verl has
	// none).
	MaxQueries int
}

// Tool is verl's search tool over a Client: the model calls
// search({"query_list": ["...", ...]}) and reads the TopK hits of each
// query, written as Format says. It implements tool.Tool and is safe for
// concurrent use.
//
// Every call's Result.Metadata holds verl's tool metrics: "status"
// ("success", "no_results" when no query found anything, "api_error" when
// the retrieval server failed, "bad_arguments"), "query_count" and
// "total_results"; a failed request adds "api_request_error" (its text)
// and "error" (its Kind). When the server fails after the client's
// retries — it timed out, answered 5xx or 4xx, or sent something that is
// not a /retrieve response — Call returns a failed Result whose Content
// is verl's text, {"result": "Search error: ..."}, and an error wrapping
// the *Error, as tool.Tool asks of a tool that cannot work: the rollout
// engine then shows the model its own error text and counts the call
// apart from the model's mistakes.
type Tool struct {
	client *Client
	cfg    ToolConfig
	schema json.RawMessage
}

// NewTool returns the search tool over c.
func NewTool(c *Client, cfg ToolConfig) (*Tool, error) {
	if c == nil {
		return nil, errors.New("search: NewTool: nil Client")
	}
	if cfg.Name == "" {
		cfg.Name = DefaultToolName
	}
	if cfg.Description == "" {
		cfg.Description = DefaultDescription
	}
	switch cfg.Format {
	case "":
		cfg.Format = FormatVerl
	case FormatVerl, FormatSearchR1:
	default:
		return nil, fmt.Errorf("search: ToolConfig.Format %q: want %q or %q", cfg.Format, FormatVerl, FormatSearchR1)
	}
	if cfg.MaxQueries == 0 {
		cfg.MaxQueries = 16
	}
	// verl's schema, key order kept (its YAML spells "items" as "item",
	// which JSON Schema ignores; this one says "items").
	schema := `{"type": "function", "function": {"name": ` + pyjson.Quote(cfg.Name) +
		`, "description": ` + pyjson.Quote(cfg.Description) +
		`, "parameters": {"type": "object", "properties": {"query_list": {"type": "array", "items": {"type": "string"}, "description": ` +
		pyjson.Quote(queryListDescription) + `}}, "required": ["query_list"]}}}`
	return &Tool{client: c, cfg: cfg, schema: json.RawMessage(schema)}, nil
}

// Name returns the function name.
func (t *Tool) Name() string { return t.cfg.Name }

// Schema returns the function schema: one required parameter, query_list,
// an array of strings.
func (t *Tool) Schema() json.RawMessage { return t.schema }

// Call searches every query of args' query_list and returns the hits as
// the model reads them. Arguments without a non-empty list of strings get
// verl's failed result, "Error: 'query_list' is missing, empty, or not a
// list in parameters."; more than MaxQueries queries a failed result too.
func (t *Tool) Call(ctx context.Context, args json.RawMessage) (tool.Result, error) {
	start := time.Now()
	var a struct {
		QueryList []string `json:"query_list"`
	}
	if err := json.Unmarshal(args, &a); err != nil || len(a.QueryList) == 0 {
		return t.failed(start, "Error: 'query_list' is missing, empty, or not a list in parameters.",
			map[string]any{"status": "bad_arguments", "error": "bad_arguments", "query_count": 0, "total_results": 0}), nil
	}
	n := len(a.QueryList)
	if t.cfg.MaxQueries > 0 && n > t.cfg.MaxQueries {
		return t.failed(start, fmt.Sprintf("Error: 'query_list' has %d queries; at most %d are allowed per call.", n, t.cfg.MaxQueries),
			map[string]any{"status": "bad_arguments", "error": "bad_arguments", "query_count": n, "total_results": 0}), nil
	}
	hits, err := t.client.Search(ctx, a.QueryList)
	if err != nil {
		meta := map[string]any{"status": "api_error", "query_count": n, "total_results": 0, "api_request_error": err.Error()}
		var se *Error
		if errors.As(err, &se) {
			meta["error"] = se.Kind
		} else {
			meta["error"] = "cancelled"
		}
		return t.failed(start, "Search error: "+err.Error(), meta), fmt.Errorf("tool: %s: %w", t.cfg.Name, err)
	}
	total := 0
	for _, h := range hits {
		total += len(h)
	}
	meta := map[string]any{"status": "success", "query_count": n, "total_results": total}
	var text string
	if total == 0 {
		meta["status"] = "no_results"
		text = "No search results found."
	} else {
		text = FormatHits(hits, t.cfg.Format)
	}
	return tool.Result{Content: t.wrap(text), Duration: time.Since(start), Metadata: meta}, nil
}

// failed returns a failed result whose content is msg, as Format writes
// messages.
func (t *Tool) failed(start time.Time, msg string, meta map[string]any) tool.Result {
	return tool.Result{Content: t.wrap(msg), Failed: true, Duration: time.Since(start), Metadata: meta}
}

// wrap puts text in verl's {"result": ...} for FormatVerl.
func (t *Tool) wrap(text string) string {
	if t.cfg.Format != FormatVerl {
		return text
	}
	return `{"result": ` + pyjson.Quote(text) + `}`
}

// FormatHits writes each query's hits as format says (see FormatVerl and
// FormatSearchR1), without FormatVerl's JSON wrapping, and joins the
// queries' texts with "\n---\n".
func FormatHits(hits [][]Hit, format Format) string {
	parts := make([]string, len(hits))
	for q, list := range hits {
		var b strings.Builder
		for i, h := range list {
			b.WriteString("Doc ")
			b.WriteString(strconv.Itoa(i + 1))
			if format == FormatSearchR1 {
				b.WriteString("(Title: ")
				b.WriteString(h.Document.Title())
				b.WriteString(") ")
				b.WriteString(h.Document.Text())
				b.WriteString("\n")
			} else {
				b.WriteString(" (Title: ")
				b.WriteString(h.Document.Title())
				b.WriteString(")\n")
				b.WriteString(h.Document.Text())
				b.WriteString("\n\n")
			}
		}
		parts[q] = b.String()
		if format != FormatSearchR1 {
			parts[q] = pyStrip(parts[q])
		}
	}
	return strings.Join(parts, "\n---\n")
}

// pyStrip is Python's str.strip(): it removes the white space Python's
// str.isspace() names at both ends (pystr.IsSpace), which
// strings.TrimSpace does not all remove.
func pyStrip(s string) string { return strings.TrimFunc(s, pystr.IsSpace) }
