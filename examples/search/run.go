package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"time"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/examples/internal/arith"
	"github.com/agentrl/agentrl/examples/internal/setup"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/metrics"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/policy/toymodel"
	"github.com/agentrl/agentrl/progress"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/tool/search"
	"github.com/agentrl/agentrl/tool/search/bm25"
	"github.com/agentrl/agentrl/tool/search/encyclopedia"
)

// heldOutSeed orders the test split before the first -eval questions are
// taken, whatever -seed: every seed is evaluated on the same questions.
const heldOutSeed = 1000

// runOptions runs the program with parsed flags.
func runOptions(ctx context.Context, o options, stdout, stderr io.Writer) error {
	start := time.Now()
	tok, err := newTokenizer()
	if err != nil {
		return err
	}
	url := o.retriever
	if url == "" {
		var stop func()
		if url, stop, err = serveCorpus(ctx, encyclopedia.Corpus(), stderr); err != nil {
			return err
		}
		defer stop()
	}
	client, st, err := searchTool(url, o.topK)
	if err != nil {
		return fmt.Errorf("-retriever: %w", err)
	}
	enc, err := encyclopedia.Generate(encyclopedia.DefaultConfig()) // the shipped corpus and questions
	if err != nil {
		return err
	}
	train, err := questions(enc, "train", o.query)
	if err != nil {
		return err
	}
	test, err := questions(enc, "test", o.query)
	if err != nil {
		return err
	}

	dir := o.out
	if dir == "" {
		dir = filepath.Join("runs", "search-"+time.Now().UTC().Format("20060102-150405"))
	}
	rd, err := setup.LockRunDir(dir) // a second run on the folder stops at once
	if err != nil {
		return err
	}
	defer rd.Release()
	if err := rd.CheckNew("metrics.jsonl", "sft_metrics.jsonl"); err != nil {
		return err
	}
	mc := modelConfig(o, tok)
	dev, err := setup.OpenDevice(ctx, o.device, mc, stderr)
	if err != nil {
		return err
	}
	defer dev.Close()
	model, err := policy.New(mc, o.seed, policy.WithDecoder(tok.Decode), policy.WithSamplerSeed(o.seed), policy.WithBackend(dev.Backend()))
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	defer model.Close()
	fmt.Fprintf(stderr, "model: qwen3, %d layers, hidden %d, %d parameters; retrieval: %s, top %d; run folder: %s\n",
		mc.NumHiddenLayers, mc.HiddenSize, mc.NumParams(), url, o.topK, dir)

	// SFT on generated search trajectories.
	sft, err := sftData(ctx, o, tok, train, test, st, stderr)
	if err != nil {
		return err
	}
	if err := arith.RunSFT(ctx, model, sft.Samples, arith.SFTOptions{Steps: o.sftSteps, Batch: o.sftBatch, LR: o.sftLR, Seed: o.seed},
		dir, agentrl.DataParallel{}, stderr); err != nil {
		return err
	}

	engine, err := arith.NewEngine(model, tok, st, o.maxResponse)
	if err != nil {
		return err
	}
	rf, err := reward.QAFunc(reward.SearchR1QA())
	if err != nil {
		return err
	}
	heldOut := prompts(shuffled(test, heldOutSeed)[:min(o.evalQuestions, len(test))])
	params := lm.SampleParams{Temperature: o.temperature, TopP: 1, TopK: -1, MaxNewTokens: o.maxResponse}
	fmt.Fprintf(stderr, "evaluating the SFT policy on %d held-out questions × %d samples\n", len(heldOut), o.n)
	before, err := arith.EvaluatePrompts(ctx, engine, rf, heldOut, params, o.n)
	if err != nil {
		return fmt.Errorf("evaluating the SFT policy: %w", err)
	}
	generations := filepath.Join(dir, "validation")
	if err := arith.WriteGenerations(generations, 0, before.Generations); err != nil {
		return err
	}

	// GRPO-TCR with the search tool in the loop.
	order := shuffled(train, o.seed)
	rlQuestions := make([]question, o.prompts*max(o.rlSteps, 1))
	for i := range rlQuestions {
		rlQuestions[i] = order[i%len(order)]
	}
	log, err := metrics.Open(filepath.Join(dir, "metrics.jsonl"), metrics.Options{})
	if err != nil {
		return err
	}
	defer log.Close()
	tcfg := arith.RLConfig(arith.RLOptions{Prompts: o.prompts, N: o.n, MiniBatch: o.miniBatch, Temperature: o.temperature,
		MaxResponse: o.maxResponse, LR: o.rlLR, Seed: o.seed})
	tr, err := agentrl.NewTrainer(tcfg, agentrl.TrainerParts{Policy: model, Engine: engine, Reward: rf, Prompts: prompts(rlQuestions), Metrics: log})
	if err != nil {
		return err
	}
	defer tr.Close()
	if err := log.Log(0, before.Metrics); err != nil {
		return err
	}
	after := before
	if o.rlSteps > 0 {
		err := tr.Run(ctx, agentrl.RunConfig{
			Steps:    o.rlSteps,
			Recorder: progress.New(progress.Config{Out: stderr, Description: "grpo-tcr", Interval: 10 * time.Second}),
			Validate: func(ctx context.Context, step int) (map[string]float64, error) {
				fmt.Fprintf(stderr, "evaluating the RL policy on %d held-out questions × %d samples\n", len(heldOut), o.n)
				var err error
				if after, err = arith.EvaluatePrompts(ctx, engine, rf, heldOut, params, o.n); err != nil {
					return nil, fmt.Errorf("evaluating the RL policy: %w", err)
				}
				return after.Metrics, arith.WriteGenerations(generations, step, after.Generations)
			},
		})
		if err != nil {
			return err
		}
	}

	modelDir := filepath.Join(dir, "model")
	if err := model.Save(modelDir, lm.SaveOptions{}); err != nil {
		return fmt.Errorf("saving the model: %w", err)
	}
	if err := tok.WriteHF(modelDir, tokenizer.HFOptions{Control: specials[:6]}); err != nil {
		return err
	}
	arith.PrintTable(stdout, o.n, []arith.Named{{Name: "SFT", Eval: before}, {Name: "SFT+GRPO-TCR", Eval: after}})
	cs := client.Stats()
	fmt.Fprintf(stdout, "searches: %d calls in %d requests, %d failed\nmetrics: %s\nmodel (HF format, with tokenizer.json): %s\n",
		cs.Calls, cs.Requests, cs.Failed, filepath.Join(dir, "metrics.jsonl"), modelDir)
	return arith.WriteJSONLine(stdout, o.n, []arith.Named{{Name: "sft", Eval: before}, {Name: "rl", Eval: after}}, time.Since(start))
}

// sftWorldSeed is the seed of the encyclopedia -sft-world generates
// (the shipped one's is 1): its names are other than the shipped
// corpus's, and the same whatever -seed.
const sftWorldSeed = 2

// sftData generates the SFT trajectories. With -sft-world 0 they are
// about the shipped corpus's train questions (train), searched with st.
// Otherwise they are about every question of an encyclopedia of their
// own, of about -sft-world passages, which an embedded BM25 server of its
// own serves for as long as the trajectories take to generate; a question
// about a passage whose title a held-out question (test) needs is left
// out. The model then cannot lower its SFT loss by remembering the
// subjects' names and answers, as it can on the shipped train questions
// (913 about 240 subjects, each seen many times over the updates): only
// copying the name from the question into the query, and the answer from
// the passage, lowers it, and that is what the held-out questions need.
func sftData(ctx context.Context, o options, tok *tokenizer.Bytes, train, test []question, st *search.Tool, stderr io.Writer) (sftSet, error) {
	if o.sftWorld == 0 {
		sft, err := buildSFT(ctx, train, tok, st, o.sftSamples, o.maxResponse, o.noSearchFrac, o.seed)
		if err == nil && o.sftSteps > 0 {
			fmt.Fprintf(stderr, "sft: %d trajectories over %d train questions (%d left out: a query missed its passage; %d longer than -max-response; %d answer without searching), %d updates of %d\n",
				len(sft.Samples), len(train)-sft.Skipped-sft.TooLong, sft.Skipped, sft.TooLong, sft.NoSearch, o.sftSteps, o.sftBatch)
		}
		return sft, err
	}
	enc, err := encyclopedia.Generate(encyclopedia.Scaled(o.sftWorld, sftWorldSeed))
	if err != nil {
		return sftSet{}, err
	}
	var corpus bytes.Buffer
	if err := enc.WriteCorpus(&corpus); err != nil {
		return sftSet{}, err
	}
	url, stop, err := serveCorpus(ctx, &corpus, stderr)
	if err != nil {
		return sftSet{}, err
	}
	defer stop()
	_, wst, err := searchTool(url, o.topK)
	if err != nil {
		return sftSet{}, err
	}
	heldOut := map[string]bool{}
	for _, q := range test {
		for _, t := range q.Titles {
			heldOut[t] = true
		}
	}
	var qs []question
	leftOut := 0
	for _, split := range []string{"train", "test"} {
		part, err := questions(enc, split, o.query)
		if err != nil {
			return sftSet{}, err
		}
		for _, q := range part {
			if slices.ContainsFunc(q.Titles, func(t string) bool { return heldOut[t] }) {
				leftOut++
				continue
			}
			qs = append(qs, q)
		}
	}
	sft, err := buildSFT(ctx, qs, tok, wst, o.sftSamples, o.maxResponse, o.noSearchFrac, o.seed)
	if err == nil && o.sftSteps > 0 {
		fmt.Fprintf(stderr, "sft: %d trajectories over %d questions of an SFT encyclopedia of %d passages (%d left out: a query missed its passage; %d longer than -max-response; %d about a held-out subject; %d answer without searching), %d updates of %d\n",
			len(sft.Samples), len(qs)-sft.Skipped-sft.TooLong, len(enc.Passages), sft.Skipped, sft.TooLong, leftOut, sft.NoSearch, o.sftSteps, o.sftBatch)
	}
	return sft, err
}

// searchTool is the search tool the policy calls: Search-R1's text for
// the top topK hits of the retrieval server at url.
func searchTool(url string, topK int) (*search.Client, *search.Tool, error) {
	client, err := search.NewClient(search.ClientConfig{URL: url, TopK: topK, MaxAttempts: 3, RetryDelay: 100 * time.Millisecond})
	if err != nil {
		return nil, nil, err
	}
	st, err := search.NewTool(client, search.ToolConfig{Format: search.FormatSearchR1})
	if err != nil {
		return nil, nil, err
	}
	return client, st, nil
}

// serveCorpus indexes corpus (JSON Lines in Search-R1's format) with BM25
// and serves it over Search-R1's retrieval API on a loopback port; it
// returns the /retrieve URL and the function that stops the server.
func serveCorpus(ctx context.Context, corpus io.Reader, stderr io.Writer) (string, func(), error) {
	ix, err := bm25.Build(ctx, corpus, bm25.Config{})
	if err != nil {
		return "", nil, fmt.Errorf("indexing the encyclopedia: %w", err)
	}
	srv, err := bm25.NewServer(ix, bm25.ServerConfig{})
	if err != nil {
		ix.Close()
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		ix.Close()
		return "", nil, fmt.Errorf("retrieval server: %w", err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	stop := func() {
		_ = hs.Close()
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(stderr, "retrieval server: %v\n", err)
		}
		ix.Close()
	}
	return "http://" + ln.Addr().String() + "/retrieve", stop, nil
}

// shuffled returns a copy of qs in the order seed draws.
func shuffled(qs []question, seed uint64) []question {
	out := append([]question(nil), qs...)
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// promptRoom is the room a prompt takes in the model's positions, with
// room to spare: the longest question's chat prompt is about 100 tokens.
const promptRoom = 256

// modelConfig is a small Qwen3 over the byte tokenizer: the flags' body,
// head size hidden/heads, half as many key/value heads, 1024 positions
// or, for a larger -max-response, as many as a prompt and the response
// take.
func modelConfig(o options, tok *tokenizer.Bytes) policy.Config {
	c := toymodel.Shape{Hidden: o.hidden, Layers: o.layers, Heads: o.heads, KVHeads: o.heads / 2,
		HeadDim: o.hidden / o.heads, FFN: o.ffn, MaxPosition: max(1024, promptRoom+o.maxResponse)}.Config()
	eos, _ := tok.TokenID(arith.ImEnd)
	c.VocabSize, c.EOSTokenIDs, c.RopeTheta = tok.VocabSize(), []int{eos}, 10000
	return c
}
