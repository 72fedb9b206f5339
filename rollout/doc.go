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
// <tool_call> JSON, the default; a model family's format, see below; or
// CodeBlocks for ReTool-style code),
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
// # Partial rollouts
//
// A sampler may interrupt a turn — an inference fleet whose weights are
// published in the middle of it (fleet.Config.PartialRollouts), a server
// paused in abort mode — and return what it sampled so far with
// lm.FinishAbort and the WeightVersion that sampled it. The engine then
// does not throw the turn away: it sends the trajectory so far with
// those tokens appended, asking for the rest of the turn's token budget,
// and joins the pieces into one turn (at most Config.MaxResumes times).
// Each piece keeps its own tokens and log-probabilities exactly as its
// weights sampled them, and Turn.Segments records which version sampled
// which tokens (Trajectory.TokenVersions, token by token), so that a
// trainer bounds staleness and corrects the mismatch token by token. A
// stop string that spans a cut, which neither piece's sampler could see,
// ends the turn where an uninterrupted sampler would have; a Seed does
// not reproduce an interrupted turn's uninterrupted sample (each piece
// draws from its own request).
//
// # Tool-call formats
//
// Each model family writes tool calls in its own format and reads results
// in its own chat-template layout; a ToolFormat pairs the two, by vLLM's
// --tool-call-parser name (ToolFormatByName) or from the model's chat
// template (ToolFormatFromTemplate):
//
//   - "hermes": Hermes, <tool_call> JSON (Qwen2.5, Qwen3), results in
//     ChatML;
//   - "qwen3_coder": Qwen3Coder, <tool_call><function=…><parameter=…> XML
//     whose values the tools' schemas type (a SchemaParser: the engine
//     passes it the request's tool schemas), results in Qwen3CoderResults;
//   - "llama3_json": Llama3JSON, bare JSON calls (Llama 3.1-3.3), results
//     as ipython messages (Llama3Results);
//   - "openai": Harmony, gpt-oss's harmony messages with a recipient,
//     results as tool messages (HarmonyResults).
//
// A call a parser cannot read becomes a ParsedCall whose Err wraps
// ErrBadToolCall; the engine answers it with an error result the model
// reads. Harmony's token-faithful rendering needs a tokenizer for
// o200k_harmony, which policy/tokenizer cannot load (its pre-tokenizer
// regex is not one the package runs); the text rendering follows the
// harmony spec.
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
