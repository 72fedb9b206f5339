// Package rollout holds the engine that interleaves generation and tool
// calls turn by turn and records token-faithful trajectories: the exact
// sampled token ids, a loss mask that is 1 only on policy-sampled tokens,
// the sampler's log-probabilities, turn boundaries and every tool call.
//
// rollout may import policy, policy/tokenizer and tool; it must not import
// reward, advantage, loss or the root package.
package rollout
