package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/examples/internal/arith"
	"github.com/agentrl/agentrl/examples/internal/setup"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/policytest"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
	"github.com/agentrl/agentrl/tool/search"
	"github.com/agentrl/agentrl/tool/search/bm25"
	"github.com/agentrl/agentrl/tool/search/encyclopedia"
)

// tinyArgs runs every stage in seconds: a one-layer model, 3 SFT
// updates, 1 RL step of 2 questions × 4 samples, 4 held-out questions.
func tinyArgs(dir string, extra ...string) []string {
	return append([]string{"-out", dir, "-hidden", "32", "-layers", "1", "-heads", "2", "-ffn", "64",
		"-sft-samples", "32", "-sft-steps", "3", "-sft-batch", "8", "-rl-steps", "1", "-prompts", "2", "-n", "4", "-eval", "4",
		"-max-response", "512"}, extra...)
}

// TestRunTiny runs the whole pipeline (retrieval server, SFT, evaluation,
// GRPO-TCR with the search tool, evaluation) at a tiny size, against the
// embedded server and against a running one, and checks its outputs; it
// asserts nothing about learning.
func TestRunTiny(t *testing.T) {
	ix, err := bm25.Build(context.Background(), encyclopedia.Corpus(), bm25.Config{})
	require.NoError(t, err)
	defer ix.Close()
	srv, err := bm25.NewServer(ix, bm25.ServerConfig{})
	require.NoError(t, err)
	var requests atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		srv.ServeHTTP(w, r)
	}))
	defer hs.Close()

	for _, tc := range []struct {
		name  string
		extra []string
		sft   string // the start of the line that describes the SFT data
	}{
		// An SFT encyclopedia of its own: about 300 passages, other names
		// than the shipped corpus's (so none is left out as held out).
		// The question as the first query misses its passage for 75 of
		// its 1150 questions; 14 trajectories outrun -max-response 512.
		{"embedded", []string{"-sft-world", "300"},
			"sft: 32 trajectories over 1061 questions of an SFT encyclopedia of 300 passages (75 left out: a query missed its passage; 14 longer than -max-response; 0 about a held-out subject; "},
		// The shipped train questions, searched on the running server by
		// name: none misses, and two passages per search make 283 of the
		// 913 longer than 512 tokens.
		{"running server", []string{"-retriever", hs.URL + "/retrieve", "-topk", "2", "-sft-world", "0", "-query", "name"},
			"sft: 32 trajectories over 630 train questions (0 left out: a query missed its passage; 283 longer than -max-response; "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var stdout, stderr bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			require.Zero(t, program(ctx, tinyArgs(dir, tc.extra...), &stdout, &stderr), stderr.String())

			lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
			last := lines[len(lines)-1]
			var got map[string]json.RawMessage
			require.NoError(t, json.Unmarshal([]byte(last), &got), last)
			require.Contains(t, got, "seconds")
			for _, stage := range []string{"sft", "rl"} {
				require.Contains(t, got, stage)
				var m map[string]float64
				require.NoError(t, json.Unmarshal(got[stage], &m))
				for _, k := range []string{"avg@4", "pass@4", "maj@4"} {
					require.Contains(t, m, k)
					assert.GreaterOrEqual(t, m[k], 0.0)
					assert.LessOrEqual(t, m[k], 1.0)
				}
				assert.GreaterOrEqual(t, m["pass@4"], m["avg@4"])
			}
			assert.Contains(t, stdout.String(), "SFT+GRPO-TCR")
			assert.Contains(t, stdout.String(), ", 0 failed")
			assert.Contains(t, stderr.String(), tc.sft)
			for _, f := range []string{"metrics.jsonl", "sft_metrics.jsonl", "model/config.json", "model/model.safetensors", "model/tokenizer.json"} {
				_, err := os.Stat(filepath.Join(dir, f))
				assert.NoError(t, err, f)
			}
			// The held-out responses before and after RL (step 1), 4
			// questions × 4 samples, in verl's validation-dump layout.
			for _, step := range []string{"0", "1"} {
				b, err := os.ReadFile(filepath.Join(dir, "validation", step+".jsonl"))
				require.NoError(t, err)
				rows := strings.Split(strings.TrimSpace(string(b)), "\n")
				require.Len(t, rows, 16)
				for _, row := range rows {
					var g struct {
						Input, Output, GTS string
						Score              float64
						Step               int
					}
					require.NoError(t, json.Unmarshal([]byte(row), &g), row)
					assert.True(t, strings.HasPrefix(g.Input, "<|im_start|>user\n"), row)
					assert.True(t, strings.HasPrefix(g.GTS, `{"target":`), row)
					assert.Contains(t, []float64{0, 1}, g.Score)
					assert.Equal(t, step, strconv.Itoa(g.Step))
				}
			}
			// The folder now holds a run: a second one is refused.
			stderr.Reset()
			assert.Equal(t, 1, program(ctx, tinyArgs(dir, tc.extra...), &stdout, &stderr))
			assert.Contains(t, stderr.String(), "holds an earlier run")
			// The saved model's tokenizer encodes as the program's.
			bpe, err := tokenizer.Load(filepath.Join(dir, "model"))
			require.NoError(t, err)
			tok, err := newTokenizer()
			require.NoError(t, err)
			text := callText("Quaith Drandrourk born") + answerText("Truji")
			assert.Equal(t, tok.Encode(text), bpe.Encode(text))
		})
	}
	assert.Positive(t, requests.Load(), "-retriever's server answered the searches")
}

// TestQuestions: every shipped question gets one query per passage of
// its evidence, and the second passage of a two-hop question is named
// in the first, so the model can copy its query from what it read.
func TestQuestions(t *testing.T) {
	enc, err := encyclopedia.Generate(encyclopedia.DefaultConfig())
	require.NoError(t, err)
	text := map[string]string{}
	for _, p := range enc.Passages {
		text[p.Title] = p.Text
	}
	for _, split := range []string{"train", "test"} {
		byName, err := questions(enc, split, queryName)
		require.NoError(t, err)
		require.NotEmpty(t, byName)
		asked, err := questions(enc, split, queryQuestion)
		require.NoError(t, err)
		require.Len(t, asked, len(byName))
		for i, q := range byName {
			require.Len(t, q.Queries, q.Hops, q.Text)
			assert.True(t, strings.HasPrefix(q.Queries[0], q.Titles[0]+" "), q.Queries[0])
			assert.Equal(t, q.Text, asked[i].Queries[0], "-query question: the first search is the question")
			assert.Equal(t, q.Queries[1:], asked[i].Queries[1:], "-query question: the second hop's search is the name's")
			assert.Contains(t, q.Text, strings.TrimPrefix(q.Titles[0], "The "), "the question names its subject")
			if q.Hops == 2 {
				assert.Contains(t, text[q.Titles[0]], q.Titles[1], "%s: the first passage names the second", q.Text)
			}
			assert.Contains(t, text[q.Titles[q.Hops-1]], q.Answer, "the last passage holds the answer")
		}
	}
	// A kind of question the program does not know is an error, not a
	// trajectory with a wrong query.
	odd := &encyclopedia.Encyclopedia{Passages: enc.Passages[:1], Questions: []encyclopedia.Question{
		{Split: "train", Text: "Who?", Answer: "x", Kind: "comet_orbit", Hops: 1, Evidence: []string{"0"}}}}
	_, err = questions(odd, "train", queryName)
	assert.ErrorContains(t, err, "of kind comet_orbit: no query for its passage 1")
	_, err = questions(enc, "train", "title")
	assert.ErrorContains(t, err, `first query "title"`)
}

// TestBuildSFT checks the trajectories against the real search tool
// over the embedded server: a searching trajectory is the prompt, each
// query's call and the tool's answer to it, and the answer, with the
// model's own tokens (calls and answer) trained and the rest masked; a
// guessing one answers at once with an answer of the same kind.
func TestBuildSFT(t *testing.T) {
	ctx := context.Background()
	url, stop, err := serveCorpus(ctx, encyclopedia.Corpus(), &bytes.Buffer{})
	require.NoError(t, err)
	defer stop()
	client, err := search.NewClient(search.ClientConfig{URL: url, TopK: 1})
	require.NoError(t, err)
	st, err := search.NewTool(client, search.ToolConfig{Format: search.FormatSearchR1})
	require.NoError(t, err)
	tok, err := newTokenizer()
	require.NoError(t, err)
	enc, err := encyclopedia.Generate(encyclopedia.DefaultConfig())
	require.NoError(t, err)
	all, err := questions(enc, "train", queryName)
	require.NoError(t, err)
	var twoHop question
	for _, q := range all {
		if q.Hops == 2 {
			twoHop = q
			break
		}
	}

	set, err := buildSFT(ctx, []question{twoHop}, tok, st, 3, 768, 0, 1)
	require.NoError(t, err)
	assert.Zero(t, set.Skipped)
	assert.Zero(t, set.NoSearch)
	require.Len(t, set.Samples, 3)
	s := set.Samples[0]
	require.Len(t, s.Mask, len(s.IDs))
	var trained, masked []int
	for i, id := range s.IDs {
		if s.Mask[i] == 1 {
			trained = append(trained, id)
		} else {
			masked = append(masked, id)
		}
	}
	assert.Equal(t, callText(twoHop.Queries[0])+callText(twoHop.Queries[1])+answerText(twoHop.Answer), tok.Decode(trained))
	full := tok.Decode(s.IDs)
	assert.True(t, strings.HasPrefix(full, promptText(twoHop)+callText(twoHop.Queries[0])+arith.ImEnd+"\n<|im_start|>user\n<tool_response>\nDoc 1(Title: \""+twoHop.Titles[0]+"\") "), full)
	assert.Contains(t, tok.Decode(masked), "Doc 1(Title: \""+twoHop.Titles[1]+"\") ", "the second search found the second passage")
	assert.Contains(t, tok.Decode(masked), twoHop.Answer)

	// The calls parse as the rollout engine parses them, into the search
	// tool's arguments.
	calls := rollout.Hermes{}.Parse(callText(twoHop.Queries[1]))
	require.Len(t, calls, 1)
	assert.Equal(t, "search", calls[0].Name)
	want, err := json.Marshal(map[string][]string{"query_list": {twoHop.Queries[1]}})
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(calls[0].Arguments))

	// -query question: the first call is the question itself. BM25 finds
	// the first passage at top 1 for 854 of the 913 train questions; the
	// 59 it misses (counted by querying the index directly, bm25.Index's
	// Search with each question at top 1) are 22 of 77 person_profession
	// questions (a work's passage names the person too), all 19
	// river_source_height ones (the mountain's passage names the river
	// and answers) and 18 of 66 work_creator_birthplace ones.
	asked, err := questions(enc, "train", queryQuestion)
	require.NoError(t, err)
	set, err = buildSFT(ctx, asked, tok, st, 20, 768, 0, 3)
	require.NoError(t, err)
	assert.Equal(t, 59, set.Skipped)
	for _, s := range set.Samples {
		text := tok.Decode(s.IDs)
		i := strings.Index(text, "<|im_start|>assistant\n")
		require.Positive(t, i)
		q := strings.TrimSuffix(strings.TrimPrefix(text[:i], "<|im_start|>user\n"), arith.ImEnd+"\n")
		assert.True(t, strings.HasPrefix(text[i:], "<|im_start|>assistant\n"+callText(q)), text)
	}

	// Guesses: an answer of a question of the same kind, no search.
	set, err = buildSFT(ctx, all, tok, st, 50, 768, 1, 2)
	require.NoError(t, err)
	assert.Equal(t, 50, set.NoSearch)
	answers := map[string]bool{}
	for _, q := range all {
		answers[answerText(q.Answer)] = true
	}
	for _, s := range set.Samples {
		text := tok.Decode(s.IDs)
		i := strings.Index(text, "<|im_start|>assistant\n")
		require.Positive(t, i)
		assert.True(t, answers[text[i+len("<|im_start|>assistant\n"):]], text)
	}
}

// TestUsage: a mistake on the command line exits with status 2 before
// anything runs, its cause on the first line of stderr.
func TestUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-topk", "4"}, "-topk 4: want 1, 2 or 3"},
		{[]string{"-heads", "3"}, "-heads 3: want an even number ≥ 2 that divides -hidden 128"},
		{[]string{"-retriever", "localhost:8000"}, `-retriever: "localhost:8000" is not an http(s) URL (want scheme://host:port)`},
		{[]string{"-no-search-frac", "1.5"}, "-no-search-frac 1.5: want within [0, 1]"},
		{[]string{"-sft-samples", "4"}, "-sft-samples 4: want at least -sft-batch 16"},
		{[]string{"-sft-world", "-1"}, "-sft-world -1: want 0 (the shipped train questions) or more"},
		{[]string{"-rl-steps", "-1"}, "-rl-steps -1: want ≥ 0"},
		{[]string{"extra"}, `unexpected arguments ["extra"]`},
	} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 2, program(context.Background(), c.args, &stdout, &stderr), c.args)
		assert.Equal(t, "search: "+c.msg+"\n"+setup.HelpPointer("search")+"\n", stderr.String())
		assert.Empty(t, stdout.String())
	}
}

// TestEvaluationOfAScriptedExpert rules out the evaluation and the reward
// as the reason a policy scores low: a scripted sampler that writes, for
// every held-out question, the calls and the answer the SFT trajectories
// teach (a search per evidence passage, with the queries the program
// generates, then the answer) scores avg@2 = 1 through the program's own
// engine, search tool, embedded BM25 server and Search-R1's exact-match
// reward, with one tool call per hop; the same calls with the answer of
// another question score 0.
func TestEvaluationOfAScriptedExpert(t *testing.T) {
	ctx := context.Background()
	url, stop, err := serveCorpus(ctx, encyclopedia.Corpus(), &bytes.Buffer{})
	require.NoError(t, err)
	defer stop()
	_, st, err := searchTool(url, 1)
	require.NoError(t, err)
	tok, err := newTokenizer()
	require.NoError(t, err)
	enc, err := encyclopedia.Generate(encyclopedia.DefaultConfig())
	require.NoError(t, err)
	test, err := questions(enc, "test", queryName)
	require.NoError(t, err)
	rf, err := reward.QAFunc(reward.SearchR1QA())
	require.NoError(t, err)
	params := lm.SampleParams{Temperature: 1, TopP: 1, TopK: -1, MaxNewTokens: 768}
	for _, c := range []struct {
		name  string
		shift int // answer question i+shift's answer
		want  float64
	}{{"right answers", 0, 1}, {"another question's answers", 1, 0}} {
		t.Run(c.name, func(t *testing.T) {
			ps := policytest.New(policytest.Config{Encode: tok.Encode, Decode: tok.Decode, EOS: tok.EOSIDs()})
			hops := 0.0
			for i, q := range test {
				var turns []policytest.Response
				for _, qy := range q.Queries {
					turns = append(turns, policytest.Response{Text: callText(qy)})
				}
				answer := test[(i+c.shift)%len(test)].Answer
				if c.shift != 0 && reward.NormalizeAnswer(answer) == reward.NormalizeAnswer(q.Answer) {
					answer = "nobody"
				}
				turns = append(turns, policytest.Response{Text: answerText(answer)})
				ps.HandleText(promptText(q), turns...)
				hops += float64(q.Hops)
			}
			engine, err := arith.NewEngine(ps, tok, st, 768)
			require.NoError(t, err)
			e, err := arith.EvaluatePrompts(ctx, engine, rf, prompts(test), params, 2)
			require.NoError(t, err)
			assert.Equal(t, c.want, e.Avg)
			assert.InDelta(t, hops/float64(len(test)), e.ToolCalls, 1e-9, "a search per hop")
			assert.Zero(t, e.NoTool)
			assert.Equal(t, c.want, e.ToolAcc, "every answer searched first")
		})
	}
}
