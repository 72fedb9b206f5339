package agentrl_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
)

// tabular is a real policy small enough to reason about by hand: a bigram
// softmax model whose logits for the next token are the row of a [V,V]
// table indexed by the previous token. It implements lm.Sampler and
// lm.Trainable exactly — log-probabilities, entropies and their
// gradients in closed form, sampling from the same distribution with a
// seeded generator — so the trainer can be tested end to end without the
// transformer.
//
// With z = W[prev]/T and p = softmax(z):
//
//	log p_k       = z_k − logsumexp(z)
//	∂ log p_y/∂z_k = δ_ky − p_k
//	H             = −Σ p_k log p_k
//	∂H/∂z_k        = −p_k (log p_k + H)
//
// and ∂/∂W[prev][k] = (∂/∂z_k)/T.
type tabular struct {
	v   int
	w   []float32
	g   []float32
	eos []int
	// alphabet maps ids to text and back: id i is alphabet[i].
	alphabet string

	mu    sync.Mutex
	calls int
}

func newTabular(alphabet string, eos ...int) *tabular {
	v := len(alphabet)
	return &tabular{v: v, w: make([]float32, v*v), g: make([]float32, v*v), eos: eos, alphabet: alphabet}
}

// byteAlphabet is every byte, so that the tokenizer is the identity.
func byteAlphabet() string {
	var b strings.Builder
	for i := range 256 {
		b.WriteByte(byte(i))
	}
	return b.String()
}

func (m *tabular) Params() []lm.Param {
	return []lm.Param{{Name: "table", Data: m.w, Grad: m.g}}
}

// dist returns softmax(W[prev]/temp) and its log, in float64.
func (m *tabular) dist(prev int, temp float64) (p, logp []float64) {
	row := m.w[prev*m.v : (prev+1)*m.v]
	logp = make([]float64, m.v)
	mx := math.Inf(-1)
	for k, x := range row {
		logp[k] = float64(x) / temp
		mx = math.Max(mx, logp[k])
	}
	s := 0.0
	for _, z := range logp {
		s += math.Exp(z - mx)
	}
	lse := mx + math.Log(s)
	p = make([]float64, m.v)
	for k := range logp {
		logp[k] -= lse
		p[k] = math.Exp(logp[k])
	}
	return p, logp
}

func (m *tabular) checkIDs(ids []int, where string) error {
	for t, id := range ids {
		if id < 0 || id >= m.v {
			return fmt.Errorf("%w: %s position %d: token %d outside vocabulary %d", policy.ErrInput, where, t, id, m.v)
		}
	}
	return nil
}

func temperature(t float64) float64 {
	if t == 0 {
		return 1
	}
	return t
}

func (m *tabular) Forward(ctx context.Context, batch lm.TokenBatch, withGrad bool) (lm.TokenStats, lm.BackwardFunc, error) {
	temp := temperature(batch.Temperature)
	st := lm.TokenStats{LogProbs: make([][]float32, len(batch.Tokens)), Entropy: make([][]float32, len(batch.Tokens))}
	for b, seq := range batch.Tokens {
		if err := m.checkIDs(seq, fmt.Sprintf("sequence %d", b)); err != nil {
			return lm.TokenStats{}, nil, err
		}
		st.LogProbs[b] = make([]float32, len(seq))
		st.Entropy[b] = make([]float32, len(seq))
		for t := 1; t < len(seq); t++ {
			p, logp := m.dist(seq[t-1], temp)
			h := 0.0
			for k := range p {
				h -= p[k] * logp[k]
			}
			st.LogProbs[b][t] = float32(logp[seq[t]])
			st.Entropy[b][t] = float32(h)
		}
	}
	if !withGrad {
		return st, nil, nil
	}
	tokens := batch.Tokens
	used := false
	back := func(ctx context.Context, gl, ge [][]float32) error {
		if used {
			return fmt.Errorf("%w: backward called twice", policy.ErrInput)
		}
		used = true
		if len(gl) != len(tokens) || ge != nil && len(ge) != len(tokens) {
			return fmt.Errorf("%w: gradient rows %d/%d for %d sequences", policy.ErrInput, len(gl), len(ge), len(tokens))
		}
		acc := make([]float64, len(m.g))
		for b, seq := range tokens {
			if len(gl[b]) != len(seq) || ge != nil && len(ge[b]) != len(seq) {
				return fmt.Errorf("%w: sequence %d: gradient length differs from %d tokens", policy.ErrInput, b, len(seq))
			}
			for t := 1; t < len(seq); t++ {
				dl := float64(gl[b][t])
				de := 0.0
				if ge != nil {
					de = float64(ge[b][t])
				}
				if dl == 0 && de == 0 {
					continue
				}
				prev := seq[t-1]
				p, logp := m.dist(prev, temp)
				h := 0.0
				for k := range p {
					h -= p[k] * logp[k]
				}
				for k := range p {
					d := -p[k]
					if k == seq[t] {
						d++
					}
					acc[prev*m.v+k] += (dl*d + de*(-p[k]*(logp[k]+h))) / temp
				}
			}
		}
		for i, a := range acc {
			m.g[i] += float32(a)
		}
		return nil
	}
	return st, back, nil
}

func (m *tabular) Generate(ctx context.Context, reqs []lm.GenerateRequest) ([]lm.Generation, error) {
	out := make([]lm.Generation, len(reqs))
	for i, r := range reqs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if len(r.Prompt) == 0 {
			return nil, fmt.Errorf("%w: request %d: empty prompt", policy.ErrInput, i)
		}
		if err := m.checkIDs(r.Prompt, fmt.Sprintf("request %d prompt", i)); err != nil {
			return nil, err
		}
		var rng *rand.Rand
		if r.Params.Seed != nil {
			rng = rand.New(rand.NewPCG(*r.Params.Seed, 0x7ab))
		} else {
			m.mu.Lock()
			m.calls++
			rng = rand.New(rand.NewPCG(uint64(m.calls), 0x7ab))
			m.mu.Unlock()
		}
		temp := temperature(r.Params.Temperature)
		stop := lm.NewStopChecker(r.Params, m.eos)
		prev := r.Prompt[len(r.Prompt)-1]
		g := lm.Generation{FinishReason: lm.FinishLength}
		for r.Params.MaxNewTokens == 0 || len(g.Tokens) < r.Params.MaxNewTokens {
			p, logp := m.dist(prev, temp)
			u, tok := rng.Float64(), m.v-1
			for k, pk := range p {
				if u < pk {
					tok = k
					break
				}
				u -= pk
			}
			g.Tokens = append(g.Tokens, tok)
			g.LogProbs = append(g.LogProbs, float32(logp[tok]))
			prev = tok
			if s, done := stop.Next(tok, m.alphabet[tok:tok+1]); done {
				g.FinishReason, g.StopToken, g.StopString = s.Reason, s.Token, s.String
				break
			}
			if len(g.Tokens) > 4096 {
				break
			}
		}
		out[i] = g
	}
	return out, nil
}

// prob is p(next | prev) under the current table, temperature 1.
func (m *tabular) prob(prev, next int) float64 {
	p, _ := m.dist(prev, 1)
	return p[next]
}

// alphaTokenizer is the rollout.Tokenizer of a tabular model.
type alphaTokenizer struct{ alphabet string }

func (a alphaTokenizer) Encode(text string) []int {
	ids := make([]int, 0, len(text))
	for i := 0; i < len(text); i++ {
		if k := strings.IndexByte(a.alphabet, text[i]); k >= 0 {
			ids = append(ids, k)
		}
	}
	return ids
}

func (a alphaTokenizer) Decode(ids []int) string {
	var b strings.Builder
	for _, id := range ids {
		if id >= 0 && id < len(a.alphabet) {
			b.WriteByte(a.alphabet[id])
		}
	}
	return b.String()
}
