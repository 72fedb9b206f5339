package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/openai"
)

// orderedEntry is one key of a JSON object, in the object's order.
type orderedEntry struct {
	key string
	val float64
}

// orderedObject reads a JSON object of numbers keeping its keys' order.
func orderedObject(t *testing.T, raw json.RawMessage) []orderedEntry {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(raw))
	tok, err := d.Token()
	require.NoError(t, err)
	require.Equal(t, json.Delim('{'), tok, "%s", raw)
	var out []orderedEntry
	for d.More() {
		k, err := d.Token()
		require.NoError(t, err)
		var v float64
		require.NoError(t, d.Decode(&v))
		out = append(out, orderedEntry{k.(string), v})
	}
	return out
}

// wantTop is a position's top_logprobs as vLLM builds it
// (_create_completion_logprobs over the engine's {token id: Logprob}
// dict): the sampled token, then the listed tokens in order, each under
// its text, a text met again keeping its first place and taking the
// later value (a Python dict); values clamped at −9999.
func wantTop(text func(int) string, sampled int, lp float32, top []lm.TokenLogProb, processed bool) []orderedEntry {
	var out []orderedEntry
	set := func(id int, v float32) {
		e := orderedEntry{text(id), math.Max(float64(v), -9999)}
		if i := slices.IndexFunc(out, func(o orderedEntry) bool { return o.key == e.key }); i >= 0 {
			out[i].val = e.val
			return
		}
		out = append(out, e)
	}
	set(sampled, lp)
	for _, c := range top {
		v := c.RawLogProb
		if processed {
			v = c.LogProb
		}
		set(c.Token, v)
	}
	return out
}

// TestCompletionTopLogprobs: logprobs N returns at each position the
// sampled token and the N most likely tokens with their log-probabilities,
// in vLLM's order, as Model.Generate gives them (TopLogProbs); logprobs 0
// the sampled token alone. Both logprobs modes (processed ones are −Inf,
// sent as −9999, outside top-k), both token spellings, and a
// detokeniser under which different ids read the same (the texts
// coincide and share one key).
func TestCompletionTopLogprobs(t *testing.T) {
	dir := writeCheckpoint(t, 1, 16)
	prompt := []int{10, 20, 30}
	const seed = 5
	mod5 := func(ids []int) string {
		var b bytes.Buffer
		for _, id := range ids {
			fmt.Fprintf(&b, "<%d>", id%5)
		}
		return b.String()
	}
	for _, c := range []struct {
		name   string
		mode   openai.LogprobsMode
		decode func([]int) string
		asIDs  bool
		n      int
	}{
		{"raw, 4", openai.RawLogprobs, idDecode, false, 4},
		{"processed, 4", openai.ProcessedLogprobs, idDecode, false, 4},
		{"raw, 0", openai.RawLogprobs, idDecode, false, 0},
		{"token ids, 3", openai.RawLogprobs, idDecode, true, 3},
		{"coinciding texts, 6", openai.RawLogprobs, mod5, false, 6},
		{"processed, 20", openai.ProcessedLogprobs, idDecode, false, 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			params := lm.SampleParams{Temperature: 0.9, TopK: 3, MaxNewTokens: 5, Seed: u64(seed), Logprobs: true, TopLogprobs: c.n}
			ref := reference(t, dir, lm.GenerateRequest{Prompt: prompt, Params: params})[0]
			if c.n == 0 {
				require.Nil(t, ref.TopLogProbs)
				ref.TopLogProbs = make([][]lm.TokenLogProb, len(ref.Tokens))
			}
			require.Len(t, ref.TopLogProbs, len(ref.Tokens))
			_, ts := startServer(t, dir, Config{LogprobsMode: c.mode, Decode: c.decode})
			body, err := json.Marshal(map[string]any{
				"prompt": prompt, "max_tokens": 5, "temperature": 0.9, "top_k": 3, "seed": seed,
				"logprobs": c.n, "return_tokens_as_token_ids": c.asIDs, "return_token_ids": true,
			})
			require.NoError(t, err)
			status, out := post(t, ts.URL+"/v1/completions", string(body))
			require.Equal(t, http.StatusOK, status, "%s", out)
			var r struct {
				Choices []struct {
					TokenIDs []int `json:"token_ids"`
					Logprobs struct {
						Tokens        []string          `json:"tokens"`
						TokenLogprobs []float64         `json:"token_logprobs"`
						TopLogprobs   []json.RawMessage `json:"top_logprobs"`
					} `json:"logprobs"`
				} `json:"choices"`
			}
			require.NoError(t, json.Unmarshal(out, &r))
			ch := r.Choices[0]
			require.Equal(t, ref.Tokens, ch.TokenIDs)
			text := func(id int) string {
				if c.asIDs {
					return "token_id:" + strconv.Itoa(id)
				}
				return c.decode([]int{id})
			}
			processed := c.mode == openai.ProcessedLogprobs
			lps := ref.RawLogProbs
			if processed {
				lps = ref.LogProbs
			}
			require.Len(t, ch.Logprobs.TopLogprobs, len(ref.Tokens))
			sawMinus := false
			for i, id := range ref.Tokens {
				want := wantTop(text, id, lps[i], ref.TopLogProbs[i], processed)
				got := orderedObject(t, ch.Logprobs.TopLogprobs[i])
				require.Len(t, got, len(want), "position %d: %s", i, ch.Logprobs.TopLogprobs[i])
				for j := range want {
					assert.Equal(t, want[j].key, got[j].key, "position %d, entry %d", i, j)
					assert.InDelta(t, want[j].val, got[j].val, 1e-6, "position %d, entry %d", i, j)
					sawMinus = sawMinus || got[j].val == -9999
				}
				assert.Equal(t, text(id), ch.Logprobs.Tokens[i])
				assert.Equal(t, got[0].key, ch.Logprobs.Tokens[i], "the sampled token comes first")
			}
			if processed && c.n > 3 {
				assert.True(t, sawMinus, "tokens outside top-k 3 have processed log-prob −Inf, sent as −9999")
			}
		})
	}
}
