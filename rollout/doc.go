// Package rollout holds the engine that interleaves generation and tool
// calls turn by turn and records token-faithful trajectories: the exact
// sampled token ids, a loss mask that is 1 only on policy-sampled tokens,
// the sampler's log-probabilities, turn boundaries and every tool call.
//
// Engine.Run takes Requests (a prompt as token ids, text or messages; the
// tools; sampling parameters; N samples) and returns one Trajectory per
// sample. Each trajectory runs in its own goroutine: it asks the
// lm.Sampler for a turn (with the parser's close tag as a stop string
// and a per-trajectory Session), finds tool calls with a Parser (Hermes
// <tool_call> JSON, the default, or CodeBlocks for ReTool-style code),
// dispatches them through a tool.Registry of the request's tools (which
// checks the arguments against each tool's schema), runs them
// concurrently under a global limit and a per-call timeout (tools that
// keep state, tool.Stateful, get a session of their own per trajectory),
// appends the results as a ResultFormat renders them (ChatML, Qwen's chat
// template by default) with loss mask 0, and goes on until the model
// answers without a call or a limit is reached; Trajectory.Stop records
// which. The engine never re-renders or re-tokenises earlier turns, so
// each sampler request's prompt is exactly the trajectory so far.
//
// Concurrent trajectories share the sampler's batches: policy.Model
// batches continuously (a turn joins the running decode and leaves it as
// soon as it ends, so a trajectory waiting on a tool or a long generation
// holds up no one), as inference servers do. A Batcher gathers the
// Generate calls of concurrent trajectories into batches for samplers
// that cannot batch on their own.
//
// rollout may import lm (what it asks of a model) and tool; it must not
// import policy or policy/tokenizer (the model, its kernels and a tensor
// library: lm's TestLightDependencies pins this), reward, advantage, loss
// or the root package. It defines the small Tokenizer interface it needs
// rather than importing a tokenizer.
package rollout
