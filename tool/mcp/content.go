package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// renderResult is the text the model reads of a tool result: its content
// blocks, one after another separated by newlines (see renderContent);
// when it has none, its structured content as JSON.
func renderResult(res *sdk.CallToolResult) string {
	if len(res.Content) == 0 && res.StructuredContent != nil {
		return marshal(res.StructuredContent)
	}
	parts := make([]string, len(res.Content))
	for i, c := range res.Content {
		parts[i] = renderContent(c)
	}
	return strings.Join(parts, "\n")
}

// renderContent is the text of one content block. A text-only model
// cannot see images, audio or binary data, so those are described, never
// spelled out in base64:
//
//	text             its text
//	image            [image: MIME, N bytes]
//	audio            [audio: MIME, N bytes]
//	resource link    [resource link: URI (NAME, MIME)] DESCRIPTION
//	text resource    [resource: URI] and a newline, then its text
//	binary resource  [resource: URI, MIME, N bytes]
//
// Empty parts are left out: a link without a name or a MIME type has no
// parentheses.
func renderContent(c sdk.Content) string {
	switch c := c.(type) {
	case *sdk.TextContent:
		return c.Text
	case *sdk.ImageContent:
		return fmt.Sprintf("[image: %s, %d bytes]", orUnknown(c.MIMEType), len(c.Data))
	case *sdk.AudioContent:
		return fmt.Sprintf("[audio: %s, %d bytes]", orUnknown(c.MIMEType), len(c.Data))
	case *sdk.ResourceLink:
		s := "[resource link: " + c.URI
		if about := nonEmpty(c.Name, c.MIMEType); about != "" {
			s += " (" + about + ")"
		}
		s += "]"
		if c.Description != "" {
			s += " " + c.Description
		}
		return s
	case *sdk.EmbeddedResource:
		r := c.Resource
		if r == nil {
			return "[resource]"
		}
		if r.Blob != nil {
			return fmt.Sprintf("[resource: %s, %s, %d bytes]", r.URI, orUnknown(r.MIMEType), len(r.Blob))
		}
		return "[resource: " + r.URI + "]\n" + r.Text
	default:
		// Tool-use blocks belong to sampling, not to tool results.
		return fmt.Sprintf("[%T content]", c)
	}
}

func orUnknown(mime string) string {
	if mime == "" {
		return "unknown type"
	}
	return mime
}

func nonEmpty(s ...string) string {
	var keep []string
	for _, x := range s {
		if x != "" {
			keep = append(keep, x)
		}
	}
	return strings.Join(keep, ", ")
}

// marshal writes v as compact JSON without escaping <, > and &. The SDK
// decodes structured content into maps, so object keys come out sorted.
func marshal(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// functionSchema is an MCP tool as an OpenAI function schema, with keys in
// the order chat templates render them, as tool.FunctionSchema writes
// them; parameters is the server's inputSchema, its key order kept.
func functionSchema(name, description string, parameters json.RawMessage) (json.RawMessage, error) {
	var params bytes.Buffer
	if err := json.Compact(&params, parameters); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(`{"type": "function", "function": {"name": `)
	b.WriteString(marshal(name))
	b.WriteString(`, "description": `)
	b.WriteString(marshal(description))
	b.WriteString(`, "parameters": `)
	b.Write(params.Bytes())
	b.WriteString("}}")
	return b.Bytes(), nil
}
