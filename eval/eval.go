// Package eval computes the validation metrics of sampled responses the
// way verl computes them (verl/trainer/ppo/metric_utils.py:
// process_validation_metrics, bootstrap_metric, calc_maj_val; metric
// sections as in verl/trainer/ppo/ray_trainer.py: _validate): mean@n,
// best@k, worst@k and maj@k per data source and variable, plus the
// unbiased pass@k estimator of Chen et al. (2021). agentrl.Trainer.Validate
// returns its Result; a program scoring another model's answers builds
// Records itself.
package eval

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/gonum/stat"
)

// Sentinel errors of the evaluation functions.
var (
	// ErrNoRecords reports an evaluation over no records.
	ErrNoRecords = errors.New("eval: no evaluation records")
	// ErrInvalidRecord reports a record that cannot be evaluated: an empty
	// prompt id, a NaN or infinite value, or extra fields that differ
	// between records.
	ErrInvalidRecord = errors.New("eval: invalid evaluation record")
	// ErrInvalidConfig reports a Config with negative Resamples.
	ErrInvalidConfig = errors.New("eval: invalid evaluation configuration")
	// ErrInvalidK reports arguments of PassAtK outside 1 ≤ k ≤ n, 0 ≤ c ≤ n.
	ErrInvalidK = errors.New("eval: invalid pass@k arguments")
)

// Variable names of the evaluation, as verl names them in its validation
// metrics: "reward" is the sequence score, "acc" the correctness.
const (
	VarReward = "reward"
	VarAcc    = "acc"
)

// DefaultSeed and DefaultResamples are verl's defaults for
// bootstrap_metric (seed=42, n_bootstrap=1000).
const (
	DefaultSeed      = 42
	DefaultResamples = 1000
)

// Record is one scored response to one prompt.
type Record struct {
	// DataSource names the benchmark the prompt comes from; metrics are
	// computed per data source. Empty means "unknown", verl's default.
	DataSource string
	// PromptID identifies the prompt (verl's uid); the records of one
	// prompt are its k samples. Required.
	PromptID string
	// Score is the scalar reward (verl's "reward" variable).
	Score float64
	// Acc reports that the response is correct (verl's "acc" variable,
	// 1 or 0); pass@k counts these.
	Acc bool
	// Pred is the extracted answer that maj@k votes over; an empty Pred
	// (no answer) is a vote like any other, as in verl. When every record
	// has an empty Pred no maj@k is reported.
	Pred string
	// Extra holds further numeric per-sample variables (for example
	// "tool_calls"), each evaluated like Score. Every record must carry
	// the same names; "reward" and "acc" are reserved.
	Extra map[string]float64
}

// Config configures Evaluate. The zero value is verl's bootstrap:
// 1000 resamples with seed 42.
type Config struct {
	// Resamples is the number of bootstrap resamples for best@k, worst@k
	// and maj@k; 0 means DefaultResamples (verl's n_bootstrap).
	Resamples int
	// Seed seeds the bootstrap generator; 0 means DefaultSeed
	// (verl's np.random.seed(42)), so any other value picks another
	// stream.
	Seed uint64
}

// DefaultConfig returns the zero Config's values spelled out:
// verl's bootstrap settings, 1000 resamples with seed 42.
func DefaultConfig() Config {
	return Config{Resamples: DefaultResamples, Seed: DefaultSeed}
}

// Metric is one aggregated metric: the mean, over the prompts of one
// data source that report it, of a per-prompt statistic.
type Metric struct {
	// Source is the data source.
	Source string
	// Var is the variable: VarReward, VarAcc or an Extra name.
	Var string
	// Name is verl's metric name: "mean@N", "std@N", "best@K/mean",
	// "best@K/std", "worst@K/mean", "worst@K/std", "maj@K/mean",
	// "maj@K/std", or, for the acc variable, "pass@K".
	Name string
	// K is the sample count in the name (N or K).
	K int
	// Value is the mean over prompts.
	Value float64
	// Prompts is the number of prompts averaged.
	Prompts int
	// Core is verl's "val-core" section: the acc variable's mean, best and
	// maj metrics at the largest k; everything else is "val-aux".
	Core bool
}

// Key returns the metric's name as verl logs it:
// "val-core/<source>/<var>/<name>" or "val-aux/<source>/<var>/<name>".
func (m Metric) Key() string {
	section := "val-aux"
	if m.Core {
		section = "val-core"
	}
	return section + "/" + m.Source + "/" + m.Var + "/" + m.Name
}

// Result holds the metrics of an evaluation in a stable order: data
// sources in order of first appearance, then variables (reward, acc, extras
// by name), then metric names in verl's order.
type Result struct {
	Metrics []Metric
}

// Map returns the metrics keyed by Metric.Key, ready for a metrics log.
func (r Result) Map() map[string]float64 {
	out := make(map[string]float64, len(r.Metrics))
	for _, m := range r.Metrics {
		out[m.Key()] = m.Value
	}
	return out
}

// Value returns the value of one metric, for example
// r.Value("arith", "acc", "maj@8/mean").
func (r Result) Value(source, variable, name string) (float64, bool) {
	for _, m := range r.Metrics {
		if m.Source == source && m.Var == variable && m.Name == name {
			return m.Value, true
		}
	}
	return 0, false
}

// Ks returns the sample counts k for which metrics are reported when a
// prompt has n samples: 1, then the powers of two below n, then n
// (verl's ladder in process_validation_metrics, which starts at 2, with
// k = 1 added for pass@1). It returns nil for n < 1.
func Ks(n int) []int {
	if n < 1 {
		return nil
	}
	ks := []int{1}
	for k := 2; k < n; k *= 2 {
		ks = append(ks, k)
	}
	if n > 1 {
		ks = append(ks, n)
	}
	return ks
}

// PassAtK returns the unbiased estimator of pass@k from n samples of which c
// are correct (Chen et al. 2021, "Evaluating Large Language Models Trained
// on Code", eq. 1): 1 − C(n−c, k)/C(n, k), computed in the numerically
// stable product form 1 − Π_{i=n−c+1}^{n} (1 − k/i), and 1 when n − c < k.
// It returns ErrInvalidK unless 1 ≤ k ≤ n and 0 ≤ c ≤ n.
func PassAtK(n, c, k int) (float64, error) {
	if n < 1 || k < 1 || k > n || c < 0 || c > n {
		return 0, fmt.Errorf("%w: n=%d c=%d k=%d (need 1 ≤ k ≤ n, 0 ≤ c ≤ n)", ErrInvalidK, n, c, k)
	}
	if n-c < k {
		return 1, nil
	}
	prod := 1.0
	for i := n - c + 1; i <= n; i++ {
		prod *= 1 - float64(k)/float64(i)
	}
	return 1 - prod, nil
}

// evalPrompt holds the samples of one prompt, variable by variable.
type evalPrompt struct {
	vars  [][]float64 // [variable][sample]
	preds []int       // interned Pred of each sample
	npred int         // number of distinct preds
	acc   int         // number of correct samples
}

// evalSource accumulates the per-prompt metrics of one data source.
type evalSource struct {
	name    string
	prompts []*evalPrompt
	index   map[string]int
}

// metricAcc accumulates one metric over prompts.
type metricAcc struct {
	name string
	k    int
	vals []float64 // one per prompt
}

// Evaluate computes verl's validation metrics over records, per data
// source and variable (reward, acc and each Extra name). For every prompt
// with n samples it computes
//
//   - mean@n and, for n > 1, std@n (population standard deviation, as
//     np.std; gonum's stat.PopMeanStdDev) of the n values;
//   - for k in 2, 4, …, n (Ks without 1): best@k and worst@k, the mean
//     and standard deviation over Resamples bootstrap resamples of k
//     samples drawn with replacement of their maximum and minimum, and,
//     when records carry a Pred, maj@k, the same for the value of the
//     majority answer (verl's calc_maj_val: the answer with the most votes,
//     ties going to the answer drawn first; its value is that of its first
//     draw);
//   - for the acc variable, pass@k for every k in Ks(n) (PassAtK).
//
// and then averages each metric over the prompts that report it
// (np.mean over uids in verl).
//
// Bootstrap: like verl, the generator is re-seeded with Seed for every
// prompt and k, so the resamples do not depend on the order of prompts,
// and best@k, worst@k and maj@k of every variable share the same draws.
// verl draws with NumPy's legacy MT19937 (np.random.choice); Evaluate
// draws with math/rand/v2's PCG, so its estimates follow the same
// distribution as verl's but are not equal sample for sample.
//
// Evaluate returns ErrNoRecords for no records, ErrInvalidConfig for
// negative Resamples, and ErrInvalidRecord, naming
// the record index and field, for an empty PromptID, a NaN or infinite
// Score or Extra value, a reserved or empty Extra name, or Extra names that
// differ from those of record 0. It checks ctx between prompts.
func Evaluate(ctx context.Context, records []Record, cfg Config) (Result, error) {
	if len(records) == 0 {
		return Result{}, ErrNoRecords
	}
	if cfg.Resamples < 0 {
		return Result{}, fmt.Errorf("%w: Resamples %d < 0", ErrInvalidConfig, cfg.Resamples)
	}
	resamples := cfg.Resamples
	seed := cfg.Seed
	if seed == 0 {
		seed = DefaultSeed
	}
	if resamples == 0 {
		resamples = DefaultResamples
	}
	extras, err := validateRecords(records)
	if err != nil {
		return Result{}, err
	}
	varNames := append([]string{VarReward, VarAcc}, extras...)
	sources, hasPred := groupRecords(records, varNames)

	var out Result
	ws := &bootstrapWork{}
	for _, src := range sources {
		perVar := make([][]*metricAcc, len(varNames))
		perVarIdx := make([]map[string]int, len(varNames))
		for v := range varNames {
			perVarIdx[v] = map[string]int{}
		}
		add := func(v int, name string, k int, val float64) {
			idx, ok := perVarIdx[v][name]
			if !ok {
				idx = len(perVar[v])
				perVarIdx[v][name] = idx
				perVar[v] = append(perVar[v], &metricAcc{name: name, k: k})
			}
			perVar[v][idx].vals = append(perVar[v][idx].vals, val)
		}
		for _, p := range src.prompts {
			if err := ctx.Err(); err != nil {
				return Result{}, err
			}
			n := len(p.vars[0])
			for v := range varNames {
				mean, std := stat.PopMeanStdDev(p.vars[v], nil)
				add(v, "mean@"+strconv.Itoa(n), n, mean)
				if n > 1 {
					add(v, "std@"+strconv.Itoa(n), n, std)
				}
			}
			if n > 1 {
				for _, k := range Ks(n)[1:] {
					st := ws.run(p, k, resamples, seed, hasPred)
					ks := strconv.Itoa(k)
					for v := range varNames {
						add(v, "best@"+ks+"/mean", k, st.best[v].mean)
						add(v, "best@"+ks+"/std", k, st.best[v].std)
						add(v, "worst@"+ks+"/mean", k, st.worst[v].mean)
						add(v, "worst@"+ks+"/std", k, st.worst[v].std)
						if hasPred {
							add(v, "maj@"+ks+"/mean", k, st.maj[v].mean)
							add(v, "maj@"+ks+"/std", k, st.maj[v].std)
						}
					}
				}
			}
			for _, k := range Ks(n) {
				pk, err := PassAtK(n, p.acc, k)
				if err != nil { // unreachable: k comes from Ks(n)
					return Result{}, err
				}
				add(1, "pass@"+strconv.Itoa(k), k, pk)
			}
		}
		for v, name := range varNames {
			nMax := 0
			for _, m := range perVar[v] {
				nMax = max(nMax, m.k)
			}
			for _, m := range perVar[v] {
				core := name == VarAcc && m.k == nMax &&
					(strings.HasPrefix(m.name, "mean") || strings.HasPrefix(m.name, "maj") || strings.HasPrefix(m.name, "best"))
				out.Metrics = append(out.Metrics, Metric{
					Source: src.name, Var: name, Name: m.name, K: m.k,
					Value: stat.Mean(m.vals, nil), Prompts: len(m.vals), Core: core,
				})
			}
		}
	}
	return out, nil
}

// validateRecords checks every record and returns the sorted Extra names.
func validateRecords(records []Record) ([]string, error) {
	extras := make([]string, 0, len(records[0].Extra))
	for name := range records[0].Extra {
		extras = append(extras, name)
	}
	slices.Sort(extras)
	for i, r := range records {
		if r.PromptID == "" {
			return nil, fmt.Errorf("%w: record %d: empty PromptID", ErrInvalidRecord, i)
		}
		if math.IsNaN(r.Score) || math.IsInf(r.Score, 0) {
			return nil, fmt.Errorf("%w: record %d (prompt %q): Score is %v", ErrInvalidRecord, i, r.PromptID, r.Score)
		}
		if len(r.Extra) != len(extras) {
			return nil, fmt.Errorf("%w: record %d (prompt %q): %d Extra fields, record 0 has %d (%v)",
				ErrInvalidRecord, i, r.PromptID, len(r.Extra), len(extras), extras)
		}
		for _, name := range extras {
			v, ok := r.Extra[name]
			switch {
			case name == "" || name == VarReward || name == VarAcc:
				return nil, fmt.Errorf("%w: record %d: Extra name %q is empty or reserved", ErrInvalidRecord, i, name)
			case !ok:
				return nil, fmt.Errorf("%w: record %d (prompt %q): Extra field %q missing (record 0 has it)",
					ErrInvalidRecord, i, r.PromptID, name)
			case math.IsNaN(v) || math.IsInf(v, 0):
				return nil, fmt.Errorf("%w: record %d (prompt %q): Extra %q is %v", ErrInvalidRecord, i, r.PromptID, name, v)
			}
		}
	}
	return extras, nil
}

// groupRecords groups records by data source and prompt, in order of
// first appearance, and reports whether any record has a Pred.
func groupRecords(records []Record, varNames []string) ([]*evalSource, bool) {
	var sources []*evalSource
	srcIndex := map[string]int{}
	hasPred := false
	predIDs := map[*evalPrompt]map[string]int{}
	for _, r := range records {
		name := r.DataSource
		if name == "" {
			name = "unknown"
		}
		si, ok := srcIndex[name]
		if !ok {
			si = len(sources)
			srcIndex[name] = si
			sources = append(sources, &evalSource{name: name, index: map[string]int{}})
		}
		src := sources[si]
		pi, ok := src.index[r.PromptID]
		if !ok {
			pi = len(src.prompts)
			src.index[r.PromptID] = pi
			src.prompts = append(src.prompts, &evalPrompt{vars: make([][]float64, len(varNames))})
		}
		p := src.prompts[pi]
		acc := 0.0
		if r.Acc {
			acc = 1
			p.acc++
		}
		p.vars[0] = append(p.vars[0], r.Score)
		p.vars[1] = append(p.vars[1], acc)
		for v, name := range varNames[2:] {
			p.vars[v+2] = append(p.vars[v+2], r.Extra[name])
		}
		ids := predIDs[p]
		if ids == nil {
			ids = map[string]int{}
			predIDs[p] = ids
		}
		id, ok := ids[r.Pred]
		if !ok {
			id = len(ids)
			ids[r.Pred] = id
		}
		p.preds = append(p.preds, id)
		p.npred = len(ids)
		if r.Pred != "" {
			hasPred = true
		}
	}
	return sources, hasPred
}

// bootStat is the mean and standard deviation of a bootstrap statistic.
type bootStat struct{ mean, std float64 }

// bootResult holds, per variable, the bootstrap statistics of one prompt at
// one k.
type bootResult struct {
	best, worst, maj []bootStat
}

// bootstrapWork holds scratch buffers reused across prompts.
type bootstrapWork struct {
	draws   []int       // the k indices of one resample
	counts  []int       // votes per pred in one resample
	first   []int       // first draw position of each pred in one resample
	order   []int       // preds in order of first draw
	samples [][]float64 // [statistic*nvar+var][resample]
}

// run draws resamples bootstrap resamples of k samples of p with
// replacement (verl's bootstrap_metric with np.random.seed(seed) before the
// draws) and returns the mean and population std of their max, min and,
// when withMaj, majority value, per variable.
func (w *bootstrapWork) run(p *evalPrompt, k, resamples int, seed uint64, withMaj bool) bootResult {
	nvar := len(p.vars)
	n := len(p.preds)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	w.draws = growInts(w.draws, k)
	w.counts = growInts(w.counts, p.npred)
	w.first = growInts(w.first, p.npred)
	if cap(w.samples) < 3*nvar {
		w.samples = make([][]float64, 3*nvar)
	}
	w.samples = w.samples[:3*nvar]
	for i := range w.samples {
		if cap(w.samples[i]) < resamples {
			w.samples[i] = make([]float64, resamples)
		}
		w.samples[i] = w.samples[i][:resamples]
	}
	for b := range resamples {
		for j := range w.draws {
			w.draws[j] = rng.IntN(n)
		}
		for v := range nvar {
			vals := p.vars[v]
			hi, lo := vals[w.draws[0]], vals[w.draws[0]]
			for _, d := range w.draws[1:] {
				hi = max(hi, vals[d])
				lo = min(lo, vals[d])
			}
			w.samples[v][b] = hi
			w.samples[nvar+v][b] = lo
		}
		if !withMaj {
			continue
		}
		winDraw := w.majorityDraw(p.preds)
		for v := range nvar {
			w.samples[2*nvar+v][b] = p.vars[v][winDraw]
		}
	}
	res := bootResult{
		best:  make([]bootStat, nvar),
		worst: make([]bootStat, nvar),
		maj:   make([]bootStat, nvar),
	}
	for v := range nvar {
		res.best[v].mean, res.best[v].std = stat.PopMeanStdDev(w.samples[v], nil)
		res.worst[v].mean, res.worst[v].std = stat.PopMeanStdDev(w.samples[nvar+v], nil)
		if withMaj {
			res.maj[v].mean, res.maj[v].std = stat.PopMeanStdDev(w.samples[2*nvar+v], nil)
		}
	}
	return res
}

// majorityDraw returns the sample index whose value verl's calc_maj_val
// returns for the resample w.draws: the draws are grouped by answer in
// order of first draw (a Python dict keeps insertion order), the winner is
// the first group with the most votes (max over the dict returns the first
// maximum), and its value is that of its first draw. w.counts must be
// zero and is left zero.
func (w *bootstrapWork) majorityDraw(preds []int) int {
	w.order = w.order[:0]
	for pos, d := range w.draws {
		id := preds[d]
		if w.counts[id] == 0 {
			w.first[id] = pos
			w.order = append(w.order, id)
		}
		w.counts[id]++
	}
	win := w.order[0]
	for _, id := range w.order[1:] {
		if w.counts[id] > w.counts[win] {
			win = id
		}
	}
	for _, id := range w.order {
		w.counts[id] = 0
	}
	return w.draws[w.first[win]]
}

// growInts returns s resized to n, reallocating only when needed.
func growInts(s []int, n int) []int {
	if cap(s) < n {
		return make([]int, n)
	}
	return s[:n]
}
