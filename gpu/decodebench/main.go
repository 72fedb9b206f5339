// Command decodebench measures generation throughput of policy.Model —
// Model.Generate and serve's /v1/completions over the same model — on
// Qwen3-shaped models with random weights, beside transformers' generate
// (from gpu/scripts/hf_generate_bench.py) and the bandwidth floor, and
// prints one table. It is what gpu/scripts/decode_bench.sh runs on a GPU
// machine (see gpu/RUN_ON_GPU.md):
//
//	decodebench [-models 0.6b,4b] [-batches 32,128,256] [-prompt 512] [-new 512] [-hf hf.jsonl] [-json out.json] [-table table.txt]
//	            [-budget 9m] [-split=false] [-serve=false] [-host-init] [-device …] [-precision …]
//	            [-kernels kernels.txt] [-graph-trace trace.txt]
//
// The weights are drawn on the device where the backend can
// (policy.WithBackendInit: the 4B model's 4 billion normals take seconds
// there, minutes on the host; -host-init draws them on the host). The
// table and the JSON are written again after every point, so that a run
// cut short keeps what it measured; -budget stops starting points once
// that much time has passed, -split=false skips the one-token run that
// splits the decode time from the prefill's, and -serve=false skips the
// server's column: each shortens a run to fit a time-limited command.
//
// Each point generates greedily, every request running its -new tokens
// (the models have no end-of-sequence token), from -prompt random tokens:
// once with one new token (prefill and the first token) and once with
// -new; the difference of the two times is the decode time. Columns:
//
//	e2e        tokens/s of the whole Generate call (prefill included)
//	hf         transformers' generate on the same shape (bf16, its default dynamic cache), from -hf
//	decode     tokens/s of the decode steps alone: batch·(new−1) / (T(new) − T(1))
//	floor      the decode steps' bandwidth floor: every step reads the bf16 weights once
//	           and the bf16 keys and values of every cached position, at -bandwidth
//	           (default: measured with a device-to-device copy)
//	serve      tokens/s of batch concurrent /v1/completions requests to an in-process serve.Server
//	launches   kernel launches and cuBLAS products per decode step (package gpu's Counters)
//	trips      round trips to the backend's worker thread and uploads per step
//	graphs     decode steps replayed from a CUDA graph (of all steps)
//
// -kernels profiles each batch's decode steps after the points, on a
// backend of its own made gpu.WithProfile, and writes the device time of
// each kernel per step; -graph-trace writes why steps were or were not
// replayed from a CUDA graph (gpu.WithGraphTrace).
//
// With -device cpu and -models tiny it runs anywhere (a smoke test).
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentrl/agentrl/device"
	"github.com/agentrl/agentrl/gpu"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/backend"
	"github.com/agentrl/agentrl/serve"
)

// shape returns a model's configuration, as Qwen3's config.json files
// give them (Qwen/Qwen3-0.6B and Qwen/Qwen3-4B) without end-of-sequence
// tokens; tiny is for smoke tests.
func shape(name string) (string, bool) {
	s, ok := map[string]string{
		"0.6b": `{"model_type": "qwen3", "vocab_size": 151936, "hidden_size": 1024, "intermediate_size": 3072,
		"num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
		"max_position_embeddings": 40960, "rope_theta": 1000000, "rms_norm_eps": 1e-6, "tie_word_embeddings": true, "eos_token_id": []}`,
		"4b": `{"model_type": "qwen3", "vocab_size": 151936, "hidden_size": 2560, "intermediate_size": 9728,
		"num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
		"max_position_embeddings": 40960, "rope_theta": 1000000, "rms_norm_eps": 1e-6, "tie_word_embeddings": true, "eos_token_id": []}`,
		"tiny": `{"model_type": "qwen3", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128,
		"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
		"max_position_embeddings": 2048, "rope_theta": 10000, "tie_word_embeddings": true, "eos_token_id": []}`,
	}[name]
	return s, ok
}

type options struct {
	models    []string
	batches   []int
	prompt    int
	newTokens int
	hfFile    string
	jsonFile  string
	bandwidth float64 // bytes/s; 0: measure
	util      float64
	serve     bool
	split     bool          // time a one-token run to split out the decode time
	budget    time.Duration // start no point after this long (0: no limit)
	hostInit  bool          // draw the weights on the host
	tableFile string
	kernels   string // write the per-step kernel profile here
	trace     string // write the CUDA graph trace here
	dev       device.Config
}

// result is one point of the table.
type result struct {
	Model                string  `json:"model"`
	Batch                int     `json:"batch"`
	Prompt               int     `json:"prompt"`
	New                  int     `json:"new"`
	Seconds              float64 `json:"seconds"`
	E2E                  float64 `json:"e2e_tokens_per_s"`
	Decode               float64 `json:"decode_tokens_per_s"`
	Floor                float64 `json:"floor_tokens_per_s"`
	HF                   float64 `json:"hf_tokens_per_s,omitempty"`
	Serve                float64 `json:"serve_tokens_per_s,omitempty"`
	LaunchesPerStep      float64 `json:"launches_per_step"`
	BlasPerStep          float64 `json:"blas_per_step"`
	DownloadBytesPerStep float64 `json:"download_bytes_per_step"`
	WorkerCallsPerStep   float64 `json:"worker_calls_per_step"`
	UploadsPerStep       float64 `json:"uploads_per_step"`
	GraphReplays         uint64  `json:"graph_replays"`
	GraphCaptures        uint64  `json:"graph_captures"`
	Steps                int64   `json:"steps"`
	Preemptions          int64   `json:"preemptions"`
	KVBlocks             int     `json:"kv_blocks"`
	KVBlocksPeak         int     `json:"kv_blocks_peak"`
	Backend              string  `json:"backend"`
	Bandwidth            float64 `json:"bandwidth_bytes_per_s"`
}

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "decodebench:", err)
		os.Exit(1)
	}
}

func parse(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("decodebench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := options{dev: device.Config{}}
	models := fs.String("models", "0.6b,4b", "model shapes: 0.6b, 4b (Qwen3), tiny")
	batches := fs.String("batches", "32,128,256", "batch sizes")
	fs.IntVar(&o.prompt, "prompt", 512, "prompt tokens")
	fs.IntVar(&o.newTokens, "new", 512, "new tokens per request")
	fs.StringVar(&o.hfFile, "hf", "", "JSON lines of transformers' generate (hf_generate_bench.py) to put beside")
	fs.StringVar(&o.jsonFile, "json", "", "write the results here as JSON")
	bw := fs.Float64("bandwidth", 0, "device bandwidth in GB/s for the floor (0: measure a device copy)")
	fs.Float64Var(&o.util, "util", 0.9, "the KV cache's gpu_memory_utilization")
	fs.BoolVar(&o.serve, "serve", true, "also measure serve's /v1/completions")
	fs.BoolVar(&o.split, "split", true, "also time one new token, to split the decode steps' time from the prefill's")
	fs.DurationVar(&o.budget, "budget", 0, "start no new point after this long (0: no limit)")
	fs.BoolVar(&o.hostInit, "host-init", false, "draw the random weights on the host, not on the device")
	fs.StringVar(&o.tableFile, "table", "", "write the table here too, again after every point")
	fs.StringVar(&o.kernels, "kernels", "", "after the points, profile each batch's decode steps on a profiled backend and write the device time of each kernel per step here (and to stdout)")
	fs.StringVar(&o.trace, "graph-trace", "", "write a line per record of queued GPU work here: captured, replayed or sent, and the first call that differs from the record before (gpu.WithGraphTrace)")
	o.dev.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.bandwidth = *bw * 1e9
	for _, m := range strings.Split(*models, ",") {
		if _, ok := shape(m); !ok {
			return o, fmt.Errorf("unknown model %q (0.6b, 4b, tiny)", m)
		}
		o.models = append(o.models, m)
	}
	for _, b := range strings.Split(*batches, ",") {
		n, err := strconv.Atoi(b)
		if err != nil || n < 1 {
			return o, fmt.Errorf("bad batch size %q", b)
		}
		o.batches = append(o.batches, n)
	}
	if o.prompt < 1 || o.newTokens < 2 {
		return o, errors.New("-prompt must be ≥ 1 and -new ≥ 2")
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	hf, err := readHF(o.hfFile)
	if err != nil {
		return err
	}
	if o.trace != "" {
		f, err := os.Create(o.trace)
		if err != nil {
			return err
		}
		defer f.Close()
		bw := bufio.NewWriter(f)
		defer bw.Flush()
		o.dev.GPU = append(o.dev.GPU, gpu.WithGraphTrace(bw))
	}
	var results []result
	var profiles bytes.Buffer
	start := time.Now()
	for _, name := range o.models {
		// report writes what is measured so far: the model's rows (after
		// every point), after the earlier models'.
		base := len(results)
		report := func(rows []result) error {
			results = append(results[:base], rows...)
			return writeReport(o, results)
		}
		if err := benchModel(ctx, o, name, hf, start, report, stderr); err != nil {
			_ = writeReport(o, results)
			printTable(stdout, results)
			return fmt.Errorf("model %s: %w", name, err)
		}
		if o.kernels != "" {
			err := profileModel(ctx, o, name, start, &profiles, stderr)
			if werr := os.WriteFile(o.kernels, profiles.Bytes(), 0o644); err == nil {
				err = werr
			}
			if err != nil {
				return fmt.Errorf("model %s: profile: %w", name, err)
			}
		}
	}
	stdout.Write(profiles.Bytes())
	printTable(stdout, results)
	return writeReport(o, results)
}

// writeReport rewrites -json and -table with the results so far.
func writeReport(o options, results []result) error {
	if o.jsonFile != "" {
		data, err := json.MarshalIndent(results, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.jsonFile, data, 0o644); err != nil {
			return err
		}
	}
	if o.tableFile != "" {
		var b bytes.Buffer
		printTable(&b, results)
		return os.WriteFile(o.tableFile, b.Bytes(), 0o644)
	}
	return nil
}

// overBudget reports whether -budget has run out since start.
func (o options) overBudget(start time.Time, stderr io.Writer, what string) bool {
	if o.budget > 0 && time.Since(start) > o.budget {
		fmt.Fprintf(stderr, "budget of %s spent: %s skipped\n", o.budget, what)
		return true
	}
	return false
}

// hfKey identifies a point of hf_generate_bench.py's output.
type hfKey struct {
	model        string
	batch        int
	prompt, news int
}

func readHF(path string) (map[hfKey]float64, error) {
	out := map[hfKey]float64{}
	if path == "" {
		return out, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] != '{' {
			continue
		}
		var r struct {
			Model        string  `json:"model"`
			Batch        int     `json:"batch"`
			Prompt       int     `json:"prompt"`
			New          int     `json:"new"`
			TokensPerSec float64 `json:"tokens_per_s"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out[hfKey{r.Model, r.Batch, r.Prompt, r.New}] = r.TokensPerSec
	}
	return out, sc.Err()
}

// benchModel measures one model at every batch, handing its rows so far
// to report after each point.
func benchModel(ctx context.Context, o options, name string, hf map[hfKey]float64, t0 time.Time, report func([]result) error, stderr io.Writer) error {
	if o.overBudget(t0, stderr, "model "+name) {
		return nil
	}
	start := time.Now()
	cfg, d, m, err := openModel(ctx, o, o.dev, name)
	if err != nil {
		return err
	}
	defer d.Close()
	closeModel := m.Close
	defer func() { _ = closeModel() }()
	fmt.Fprintln(stderr, "device:", d)
	fmt.Fprintf(stderr, "%s: %d parameters, ready in %.1fs\n", name, cfg.NumParams(), time.Since(start).Seconds())
	bw := o.bandwidth
	if bw == 0 {
		if bw, err = measureBandwidth(d.Backend()); err != nil {
			return fmt.Errorf("measuring the bandwidth: %w", err)
		}
	}
	fmt.Fprintf(stderr, "bandwidth %.0f GB/s\n", bw/1e9)
	g, _ := d.Backend().(*gpu.Backend)
	var out []result
	for _, b := range o.batches {
		if o.overBudget(t0, stderr, fmt.Sprintf("%s batch %d", name, b)) {
			break
		}
		r := result{Model: name, Batch: b, Prompt: o.prompt, New: o.newTokens, Backend: d.Backend().Name(), Bandwidth: bw,
			HF: hf[hfKey{name, b, o.prompt, o.newTokens}]}
		var t1 time.Duration
		if o.split {
			if t1, _, _, err = timeGenerate(ctx, m, g, requests(cfg.VocabSize, b, o.prompt, 1, 7)); err != nil {
				return err
			}
		}
		tn, st, per, err := timeGenerate(ctx, m, g, requests(cfg.VocabSize, b, o.prompt, o.newTokens, 7))
		if err != nil {
			return err
		}
		r.Seconds = tn.Seconds()
		r.E2E = float64(b*o.newTokens) / tn.Seconds()
		if o.split && tn > t1 { // else not measured, or too short to tell apart
			r.Decode = float64(b*(o.newTokens-1)) / (tn - t1).Seconds()
		}
		r.Floor = decodeFloor(cfg, b, o.prompt, o.newTokens, bw)
		r.Preemptions, r.KVBlocks, r.KVBlocksPeak = st.Preemptions, st.KVBlocks, st.KVBlocksPeak
		if st.Steps > 0 {
			r.LaunchesPerStep = float64(per.Launches) / float64(st.Steps)
			r.BlasPerStep = float64(per.Gemms) / float64(st.Steps)
			r.DownloadBytesPerStep = float64(per.DtoHBytes) / float64(st.Steps)
			r.WorkerCallsPerStep = float64(per.WorkerCalls) / float64(st.Steps)
			r.UploadsPerStep = float64(per.HtoD) / float64(st.Steps)
		}
		r.GraphReplays, r.GraphCaptures, r.Steps = per.GraphReplays, per.GraphCaptures, st.Steps
		fmt.Fprintf(stderr, "%s batch %d: %.1fs, %.0f tokens/s end to end, %.0f decoding (floor %.0f), %d steps, %d preemptions\n",
			name, b, r.Seconds, r.E2E, r.Decode, r.Floor, st.Steps, st.Preemptions)
		out = append(out, r)
		if err := report(out); err != nil {
			return err
		}
	}
	if o.serve {
		srv, err := serve.New(serve.Config{Model: m, Name: "bench", Decode: func(ids []int) string { return "" }})
		if err != nil {
			return err
		}
		closeModel = srv.Close // the server owns the model now
		ts := httptest.NewServer(srv)
		defer ts.Close()
		for i := range out {
			if o.overBudget(t0, stderr, fmt.Sprintf("%s batch %d serve", name, out[i].Batch)) {
				break
			}
			t, err := timeServe(ctx, ts.URL, requests(cfg.VocabSize, out[i].Batch, o.prompt, o.newTokens, 7))
			if err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			out[i].Serve = float64(out[i].Batch*o.newTokens) / t.Seconds()
			fmt.Fprintf(stderr, "%s batch %d: serve %.0f tokens/s\n", name, out[i].Batch, out[i].Serve)
			if err := report(out); err != nil {
				return err
			}
		}
	}
	return nil
}

// openModel opens the device dc for model name, makes the model on it
// with random weights (drawn on the device where the backend can, unless
// -host-init) and warms it up: weights uploaded and converted, kernels
// loaded. The caller closes the model, then the device.
func openModel(ctx context.Context, o options, dc device.Config, name string) (policy.Config, *device.Device, *policy.Model, error) {
	js, _ := shape(name)
	cfg, err := policy.ParseConfig([]byte(js))
	if err != nil {
		return cfg, nil, nil, err
	}
	d, err := device.Open(ctx, dc, cfg)
	if err != nil {
		return cfg, nil, nil, err
	}
	mopts := []policy.ModelOption{policy.WithBackend(d.Backend()), policy.WithGenerateOptions(policy.GenerateOptions{GPUMemoryUtilization: o.util})}
	if _, ok := d.Backend().(backend.Initializer); ok && !o.hostInit {
		mopts = append(mopts, policy.WithBackendInit())
	}
	m, err := policy.New(cfg, 1, mopts...)
	if err == nil {
		if _, err = m.Generate(ctx, requests(cfg.VocabSize, 2, 8, 4, 0)); err != nil {
			_ = m.Close()
		}
	}
	if err != nil {
		_ = d.Close()
		return cfg, nil, nil, err
	}
	return cfg, d, m, nil
}

// requests are batch greedy requests of prompt random tokens (seeded).
func requests(vocab, batch, prompt, news int, seed uint64) []lm.GenerateRequest {
	r := rand.New(rand.NewPCG(seed, 1))
	reqs := make([]lm.GenerateRequest, batch)
	for i := range reqs {
		p := make([]int, prompt)
		for j := range p {
			p[j] = 1 + r.IntN(vocab-1)
		}
		reqs[i] = lm.GenerateRequest{Prompt: p, Params: lm.SampleParams{MaxNewTokens: news}}
	}
	return reqs
}

// timeGenerate times one Generate call and returns the model's counters
// of it, and the backend's when it is a GPU.
func timeGenerate(ctx context.Context, m *policy.Model, g *gpu.Backend, reqs []lm.GenerateRequest) (time.Duration, policy.GenerateStats, gpu.Counters, error) {
	s0 := m.GenerateStats()
	var c0 gpu.Counters
	if g != nil {
		var err error
		if c0, err = g.Counters(); err != nil {
			return 0, policy.GenerateStats{}, gpu.Counters{}, err
		}
	}
	start := time.Now()
	gens, err := m.Generate(ctx, reqs)
	el := time.Since(start)
	if err != nil {
		return 0, policy.GenerateStats{}, gpu.Counters{}, err
	}
	for i, gen := range gens {
		if len(gen.Tokens) != reqs[i].Params.MaxNewTokens {
			return 0, policy.GenerateStats{}, gpu.Counters{}, fmt.Errorf("request %d made %d tokens, not %d (%s)", i, len(gen.Tokens), reqs[i].Params.MaxNewTokens, gen.FinishReason)
		}
	}
	s1 := m.GenerateStats()
	st := s1
	st.Steps -= s0.Steps
	st.Preemptions -= s0.Preemptions
	var c gpu.Counters
	if g != nil {
		c1, err := g.Counters()
		if err != nil {
			return 0, policy.GenerateStats{}, gpu.Counters{}, err
		}
		c = c1.Sub(c0)
	}
	return el, st, c, nil
}

// timeServe sends every request at once to /v1/completions (token-id
// prompts, greedy) and times until the last answer.
func timeServe(ctx context.Context, url string, reqs []lm.GenerateRequest) (time.Duration, error) {
	var wg sync.WaitGroup
	errs := make([]error, len(reqs))
	start := time.Now()
	for i, r := range reqs {
		wg.Go(func() {
			body, _ := json.Marshal(map[string]any{"model": "bench", "prompt": r.Prompt, "max_tokens": r.Params.MaxNewTokens, "temperature": 0})
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/completions", bytes.NewReader(body))
			if err != nil {
				errs[i] = err
				return
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			var out struct {
				Usage struct {
					CompletionTokens int `json:"completion_tokens"`
				} `json:"usage"`
			}
			data, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				errs[i] = fmt.Errorf("status %d: %s", resp.StatusCode, data)
				return
			}
			if err := json.Unmarshal(data, &out); err != nil {
				errs[i] = err
				return
			}
			if out.Usage.CompletionTokens != r.Params.MaxNewTokens {
				errs[i] = fmt.Errorf("completion of %d tokens, not %d", out.Usage.CompletionTokens, r.Params.MaxNewTokens)
			}
		})
	}
	wg.Wait()
	return time.Since(start), errors.Join(errs...)
}

// decodeFloor is the decode steps' bandwidth floor in tokens/s: decode
// step t (1 … new−1) reads the weights once in bf16 (2 bytes per
// parameter) and the keys and values of the batch's prompt+t cached
// positions in bf16 (2·layers·KV heads·head dim·2 bytes each), at bw
// bytes/s; batch·(new−1) tokens over the sum of those times.
func decodeFloor(cfg policy.Config, batch, prompt, news int, bw float64) float64 {
	w := 2 * float64(cfg.NumParams())
	kv := float64(2 * cfg.NumHiddenLayers * cfg.NumKeyValueHeads * cfg.HeadDim * 2)
	var bytes float64
	for t := 1; t < news; t++ {
		bytes += w + float64(batch)*float64(prompt+t)*kv
	}
	return float64(batch*(news-1)) / (bytes / bw)
}

// measureBandwidth times device-to-device copies of 1 GiB (read and
// written: 2 GiB of traffic each), waiting with a one-element download.
func measureBandwidth(be backend.Backend) (float64, error) {
	const n = 1 << 28 // floats
	a, err := be.Alloc(n)
	if err != nil {
		return 0, err
	}
	defer be.Free(a)
	b, err := be.Alloc(n)
	if err != nil {
		return 0, err
	}
	defer be.Free(b)
	one := make([]float32, 1)
	if err := be.Copy(b, 0, a, 0, n); err != nil {
		return 0, err
	}
	if err := be.Download(one, b, 0); err != nil {
		return 0, err
	}
	const reps = 10
	start := time.Now()
	for range reps {
		if err := be.Copy(b, 0, a, 0, n); err != nil {
			return 0, err
		}
	}
	if err := be.Download(one, b, 0); err != nil {
		return 0, err
	}
	return 2 * 4 * n * reps / time.Since(start).Seconds(), nil
}

func printTable(w io.Writer, rs []result) {
	fmt.Fprintf(w, "%-6s %6s %12s %12s %8s %12s %12s %8s %12s %8s %10s %8s %8s %10s\n",
		"model", "batch", "e2e tok/s", "hf tok/s", "vs hf", "decode tok/s", "floor tok/s", "% floor", "serve tok/s", "vs e2e", "launches", "preempt",
		"trips", "graphs")
	for _, r := range rs {
		vs, sv := "-", "-"
		hfs := "-"
		if r.HF > 0 {
			hfs = fmt.Sprintf("%.0f", r.HF)
			vs = fmt.Sprintf("%.1f×", r.E2E/r.HF)
		}
		serveS := "-"
		if r.Serve > 0 {
			serveS = fmt.Sprintf("%.0f", r.Serve)
			sv = fmt.Sprintf("%.0f%%", 100*r.Serve/r.E2E)
		}
		fmt.Fprintf(w, "%-6s %6d %12.0f %12s %8s %12.0f %12.0f %7.0f%% %12s %8s %10s %8d %8s %10s\n",
			r.Model, r.Batch, r.E2E, hfs, vs, r.Decode, r.Floor, 100*r.Decode/r.Floor, serveS, sv,
			fmt.Sprintf("%.0f+%.0f", r.LaunchesPerStep, r.BlasPerStep), r.Preemptions,
			fmt.Sprintf("%.1f/%.1f", r.WorkerCallsPerStep, r.UploadsPerStep), fmt.Sprintf("%d/%d", r.GraphReplays, r.Steps))
	}
}

// profileSteps is how many decode steps profileModel profiles per batch.
const profileSteps = 16

// profileModel writes, for each batch, the device time of every kernel
// per decode step to w: the profile of a Generate of profileSteps+1 new
// tokens less that of a Generate of one (the same prefill), divided by
// profileSteps. It runs on a backend of its own made WithProfile (two
// events per call, no CUDA graphs), so its times are the kernels' alone.
func profileModel(ctx context.Context, o options, name string, t0 time.Time, w io.Writer, stderr io.Writer) error {
	dc := o.dev
	dc.GPU = append(append([]gpu.Option(nil), o.dev.GPU...), gpu.WithProfile(true))
	cfg, d, m, err := openModel(ctx, o, dc, name)
	if err != nil {
		return err
	}
	defer d.Close()
	defer m.Close()
	g, ok := d.Backend().(*gpu.Backend)
	if !ok {
		return fmt.Errorf("-kernels needs a CUDA device, not %s", d.Backend().Name())
	}
	for _, b := range o.batches {
		if o.overBudget(t0, stderr, fmt.Sprintf("%s batch %d profile", name, b)) {
			return nil
		}
		var prof [2][]gpu.KernelTime
		for i, news := range []int{1, 1 + profileSteps} {
			if _, err := g.Profile(); err != nil { // starts the record over
				return err
			}
			if _, err := m.Generate(ctx, requests(cfg.VocabSize, b, o.prompt, news, 7)); err != nil {
				return err
			}
			if prof[i], err = g.Profile(); err != nil {
				return err
			}
		}
		printProfile(w, fmt.Sprintf("%s batch %d", name, b), prof[0], prof[1], profileSteps)
		fmt.Fprintf(stderr, "%s batch %d: profiled\n", name, b)
	}
	return nil
}

// printProfile writes the kernels of (long − short)/steps, largest first,
// and the short run's total (the prefill and first token).
func printProfile(w io.Writer, title string, short, long []gpu.KernelTime, steps int) {
	type row struct {
		name  string
		calls float64
		us    float64
	}
	by := map[string]*row{}
	add := func(ks []gpu.KernelTime, sign float64) {
		for _, k := range ks {
			r := by[k.Name]
			if r == nil {
				r = &row{name: k.Name}
				by[k.Name] = r
			}
			r.calls += sign * float64(k.Calls)
			r.us += sign * float64(k.Total) / float64(time.Microsecond)
		}
	}
	add(long, 1)
	add(short, -1)
	var rows []*row
	for _, r := range by {
		r.calls /= float64(steps)
		r.us /= float64(steps)
		if r.calls > 0 || r.us > 0 {
			rows = append(rows, r)
		}
	}
	slices.SortFunc(rows, func(a, b *row) int { return cmp.Or(cmp.Compare(b.us, a.us), cmp.Compare(a.name, b.name)) })
	var total, prefill float64
	for _, r := range rows {
		total += r.us
	}
	for _, k := range short {
		prefill += float64(k.Total) / float64(time.Microsecond)
	}
	fmt.Fprintf(w, "\n%s: device time per decode step %.0f µs (kernels of %d steps); prefill and first token %.1f ms\n", title, total, steps, prefill/1e3)
	fmt.Fprintf(w, "%-36s %10s %10s %7s\n", "kernel", "calls", "µs", "share")
	for _, r := range rows {
		share := 0.0
		if total > 0 {
			share = 100 * r.us / total
		}
		fmt.Fprintf(w, "%-36s %10.1f %10.1f %6.1f%%\n", r.name, r.calls, r.us, share)
	}
}
