// Package policytest provides a scripted policy Sampler that replays fixed
// token sequences, for deterministic tests of rollout and training
// pipelines, in the manner of net/http/httptest: responses scripted per
// conversation (by prompt prefix, replayed per session) or per call, as
// token ids or text, cut at stop tokens, stop strings and token budgets
// as a real sampler would; every request is recorded, and errors, delays
// and hangs can be injected. It is safe for concurrent use.
//
// policytest is for tests; production code must not import it.
package policytest
