// Package tool defines the Tool interface that the rollout engine calls when
// the policy emits a tool call, a Registry that lists tool schemas for chat
// templates and dispatches calls by name, and the tools themselves: a local
// sandboxed code interpreter for model-written Python, a client for
// SandboxFusion clusters, and an exact arithmetic calculator.
//
// Model-written code never touches the host: the local sandbox runs it with
// no network, a private filesystem, resource limits and a wall-clock
// timeout, and every failure of it comes back as a Result the model sees.
//
// tool depends on nothing else in agentrl except internal packages.
package tool
