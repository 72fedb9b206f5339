// Package mcp makes the tools of a Model Context Protocol server
// tool.Tools, through the official Go SDK
// (github.com/modelcontextprotocol/go-sdk), so that a rollout can call
// any MCP server's tools: a stdio server the Client starts
// (Config.Command, e.g. npx -y @modelcontextprotocol/server-filesystem),
// or one listening on streamable HTTP (Config.URL).
//
// # Tools and schemas
//
// Connect initializes a session, reads every page of tools/list and makes
// a Tool of each server tool (or of those Config.Tools names). A Tool's
// Schema is an OpenAI function schema, {"type": "function", "function":
// {"name", "description", "parameters"}}, whose parameters are the
// server's inputSchema exactly as the server wrote it, keys in its order:
// a chat template renders it as a Python client's would. (The SDK decodes
// schemas into maps, which would sort their keys, so the raw answer to
// tools/list is read off the connection.) Config.Prefix renames the tools,
// so that two servers' cannot clash.
//
// # What the model reads
//
// A result's content blocks, one after another separated by newlines:
// text as it is; images, audio and binary resources described ("[image:
// image/png, 4033 bytes]"), never spelled out in base64; resource links
// as "[resource link: URI (NAME, MIME)] DESCRIPTION"; text resources as
// "[resource: URI]" and their text. A result with structured content but
// no content blocks reads as that JSON (keys sorted); the structured
// content is always in Result.Metadata["structured_content"] for reward
// functions. The text is cut to Config.Budget.
//
// # Failures
//
// Nothing a server does stalls a rollout or panics. Every call has a
// definite outcome, a failed tool.Result that says what happened, and
// Result.Metadata["error"] naming it:
//
//	"tool_error"       the server's result has isError: its text is what the model reads; nil error
//	"protocol_error"   the server answered with a JSON-RPC error ("Error: " and its message); nil error
//	"bad_arguments"    arguments that are not a JSON object; nil error
//	"timeout"          no answer within Config.CallTimeout; error wraps ErrTimeout
//	"connection_lost"  the server exited, crashed or was killed during the call; ErrConnectionLost
//	"unavailable"      no server could be had; ErrUnavailable
//	"cancelled"        the caller's context ended, or the session closed
//
// Only the first three are the model's doing (a nil error, as package tool
// has it); the rollout engine counts the others as tool failures too.
// After a timeout the server is pinged (Config.PingTimeout): one that does
// not answer is taken for hung and killed. A server that exits, by itself
// or killed, is restarted on the next call (a new connection over HTTP),
// at most Config.MaxRestarts times per session; then its calls fail at
// once with ErrUnavailable. The message of a server that exited gives its
// exit status and the end of its standard error. Client.Stats counts
// every outcome, the connections made and the restarts, for metrics;
// Metadata["connection"] says which connection of its session served a
// call.
//
// # Sessions
//
// By default every trajectory shares one session. A server that keeps
// state — files written, a browser, a database — needs a session per
// trajectory, so that the samples of a group do not see each other's
// changes: with Config.PerTrajectory the tools are tool.Stateful, and the
// rollout engine opens a Session (a server process of its own over
// stdio, an MCP session of its own over HTTP) when a trajectory starts and
// closes it when the trajectory ends. The session connects on its first
// call, so a trajectory that calls no tool starts no server. With
// Config.Workspace each session also gets a new empty directory, which
// replaces WorkspaceArg ("{workspace}") in the command's arguments:
//
//	mcp.Config{Command: []string{"npx", "-y", "@modelcontextprotocol/server-filesystem", mcp.WorkspaceArg},
//		PerTrajectory: true, Workspace: true}
//
// A stdio server runs in its own process group, which is killed with it
// (so is what npx started); on Linux it dies with the process that
// started it. Closing a session closes the server's input, then sends
// SIGTERM and SIGKILL after Config.ShutdownGrace each, as the MCP
// specification asks of clients, and removes the workspace.
//
// The client advertises no roots, sampling or elicitation capability, so
// servers do not ask it for them (server-filesystem then keeps to the
// directories it was given).
package mcp
