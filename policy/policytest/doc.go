// Package policytest provides a scripted policy Sampler that replays fixed
// token sequences, for deterministic tests of rollout and training
// pipelines, in the manner of net/http/httptest.
//
// policytest is for tests; production code must not import it.
package policytest
