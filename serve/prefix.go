package serve

import (
	"slices"
	"strconv"
	"sync"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
)

// prefixCache stands in for vLLM's automatic prefix caching on top of the
// model's sessions (lm.GenerateRequest.Session): it remembers which
// token sequence each session's KV cache holds, gives a new request the
// session whose sequence is the longest prefix of its prompt, so that
// the model prefills only the prompt's new tokens, and keeps at most max
// sessions, dropping the least recently used. The model keeps its own
// record and checks the prefix again, so a stale entry here costs a
// recomputation, never a wrong result.
type prefixCache struct {
	mu      sync.Mutex
	max     int
	next    uint64 // session names are "s<next>"
	clock   uint64
	entries map[string]*prefixEntry
}

// prefixEntry is the sequence whose keys and values a session holds.
type prefixEntry struct {
	tokens []int
	used   uint64
}

func newPrefixCache(max int) *prefixCache {
	return &prefixCache{max: max, entries: make(map[string]*prefixEntry)}
}

// assign returns a copy of reqs with sessions: the first sample of each
// prompt continues the session holding the longest prefix of its prompt,
// if any, and every other request gets a session of its own, to be
// continued by a later request. reqs come n per prompt.
func (p *prefixCache) assign(reqs []lm.GenerateRequest, n int) []lm.GenerateRequest {
	out := slices.Clone(reqs)
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range out {
		name := ""
		if i%n == 0 {
			name = p.longestPrefixLocked(out[i].Prompt)
		}
		if name == "" {
			p.next++
			name = "s" + strconv.FormatUint(p.next, 10)
		}
		out[i].Session = name
	}
	return out
}

// longestPrefixLocked names the session whose sequence is the longest
// prefix of prompt, or "".
func (p *prefixCache) longestPrefixLocked(prompt []int) string {
	best, bestLen := "", 0
	for name, e := range p.entries {
		if len(e.tokens) > bestLen && len(e.tokens) <= len(prompt) && slices.Equal(e.tokens, prompt[:len(e.tokens)]) {
			best, bestLen = name, len(e.tokens)
		}
	}
	if best != "" {
		p.clock++
		p.entries[best].used = p.clock
	}
	return best
}

// record notes the sequences the finished requests left in their
// sessions: the prompt and every generated token but the last, whose
// keys and values were never computed. Sessions beyond max are closed in
// the model, least recently used first.
func (p *prefixCache) record(reqs []lm.GenerateRequest, gens []lm.Generation, m *policy.Model) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, r := range reqs {
		if i >= len(gens) || len(gens[i].Tokens) == 0 {
			continue
		}
		g := gens[i].Tokens
		seq := make([]int, 0, len(r.Prompt)+len(g)-1)
		seq = append(append(seq, r.Prompt...), g[:len(g)-1]...)
		p.clock++
		p.entries[r.Session] = &prefixEntry{tokens: seq, used: p.clock}
	}
	for len(p.entries) > p.max {
		oldest, t := "", uint64(0)
		for name, e := range p.entries {
			if oldest == "" || e.used < t {
				oldest, t = name, e.used
			}
		}
		delete(p.entries, oldest)
		m.CloseSession(oldest)
	}
}

// clear closes every session.
func (p *prefixCache) clear(m *policy.Model) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name := range p.entries {
		m.CloseSession(name)
	}
	clear(p.entries)
}

// len reports how many sessions are remembered.
func (p *prefixCache) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.entries)
}
