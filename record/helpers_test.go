package record_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/policytest"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/policy/tokenizer/qwen3"
	"github.com/agentrl/agentrl/record"
)

// qwenTokenizer is Qwen3's real tokenizer with its chat template
// (package qwen3's files), loaded once per test binary: it is safe for
// concurrent use.
var qwenTokenizer = sync.OnceValues(func() (*tokenizer.BPE, error) {
	dir, err := os.MkdirTemp("", "record-qwen3")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := qwen3.WriteFiles(dir); err != nil {
		return nil, err
	}
	return tokenizer.Load(dir)
})

// qwen returns Qwen3's tokenizer.
func qwen(t testing.TB) *tokenizer.BPE {
	t.Helper()
	tok, err := qwenTokenizer()
	require.NoError(t, err)
	return tok
}

// spy records every request a sampler got and every generation it gave:
// what the policy sampled, independently of the Recorder's records.
type spy struct {
	lm.Sampler
	mu   sync.Mutex
	reqs []lm.GenerateRequest
	gens []lm.Generation
}

func (s *spy) Generate(ctx context.Context, reqs []lm.GenerateRequest) ([]lm.Generation, error) {
	gens, err := s.Sampler.Generate(ctx, reqs)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range reqs {
		r.Prompt = slices.Clone(r.Prompt)
		s.reqs = append(s.reqs, r)
		g := gens[i]
		g.Tokens = slices.Clone(g.Tokens)
		g.LogProbs = slices.Clone(g.LogProbs)
		s.gens = append(s.gens, g)
	}
	return gens, nil
}

func (s *spy) CloseSession(id string) {
	if c, ok := s.Sampler.(lm.SessionCloser); ok {
		c.CloseSession(id)
	}
}

// scripted is a Recorder over a scripted sampler with Qwen3's tokenizer
// and template, served on an httptest server; each session follows
// script, one response per call.
func scripted(t testing.TB, script ...string) (*record.Recorder, *spy, *httptest.Server, *tokenizer.BPE) {
	t.Helper()
	tok := qwen(t)
	ps := policytest.New(policytest.Config{Encode: tok.Encode, Decode: tok.Decode, EOS: []int{qwen3.IMEndID}})
	rs := make([]policytest.Response, len(script))
	for i, s := range script {
		rs[i] = policytest.Response{Text: s, Finish: lm.FinishStopToken}
	}
	ps.HandleDefault(rs...)
	sp := &spy{Sampler: ps}
	rec, err := record.New(record.Config{Sampler: sp, Template: record.TemplateFunc(tok.ApplyChatTemplate), Tokenizer: tok, Name: "tiny"})
	require.NoError(t, err)
	ts := httptest.NewServer(rec)
	t.Cleanup(ts.Close)
	return rec, sp, ts, tok
}

// addTool is the schema of the tools the test agents offer.
var addTool = json.RawMessage(`{"type": "function", "function": {"name": "add", "description": "Add two integers.", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}}`)
