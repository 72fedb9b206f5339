package ablation

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"text/tabwriter"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// Confidence is the level of the intervals Summarize computes.
const Confidence = 0.95

// Row is one variant's summary of a metric over its seeds.
type Row struct {
	// Variant is the variant's name.
	Variant string `json:"variant"`
	// N is the number of runs (seeds) summarised.
	N int `json:"n"`
	// Mean is the sample mean of Values.
	Mean float64 `json:"mean"`
	// Lo and Hi bound the 95% confidence interval of the mean:
	// Mean ∓ t·s/√N with s the sample standard deviation (N−1 in the
	// denominator) and t the 0.975 quantile of Student's t distribution
	// with N−1 degrees of freedom. With N = 1 there is no spread to
	// measure and Lo = Hi = Mean: the interval is the point itself, not a
	// claim of certainty.
	Lo float64 `json:"lo"`
	Hi float64 `json:"hi"`
	// Values are the runs' values, in the order of the results.
	Values []float64 `json:"values"`
}

// HalfWidth is half the interval's width, t·s/√N.
func (r Row) HalfWidth() float64 { return (r.Hi - r.Lo) / 2 }

// Summarize groups the results by variant, in the order the variants
// first appear, and summarises metric (a key of Result.Final) over each
// variant's runs: mean and 95% Student-t interval (see Row). Every result
// must hold a finite value of metric.
func Summarize(results []Result, metric string) ([]Row, error) {
	if len(results) == 0 {
		return nil, errors.New("ablation: Summarize: no results")
	}
	if metric == "" {
		return nil, errors.New("ablation: Summarize: empty metric name")
	}
	var rows []Row
	index := map[string]int{}
	for _, r := range results {
		v, ok := r.Final[metric]
		switch {
		case !ok:
			return nil, fmt.Errorf("ablation: Summarize: variant %q, seed %d has no %q (has %v)", r.Variant, r.Seed, metric, finalKeys(r))
		case math.IsNaN(v) || math.IsInf(v, 0):
			return nil, fmt.Errorf("ablation: Summarize: variant %q, seed %d: %s = %v, want a finite value", r.Variant, r.Seed, metric, v)
		}
		i, seen := index[r.Variant]
		if !seen {
			i = len(rows)
			index[r.Variant] = i
			rows = append(rows, Row{Variant: r.Variant})
		}
		rows[i].Values = append(rows[i].Values, v)
	}
	for i := range rows {
		rows[i].N = len(rows[i].Values)
		rows[i].Mean, rows[i].Lo, rows[i].Hi = interval(rows[i].Values)
	}
	return rows, nil
}

// interval is the mean of xs and its 95% Student-t interval; with one
// value, the value three times.
func interval(xs []float64) (mean, lo, hi float64) {
	n := len(xs)
	if n == 1 {
		return xs[0], xs[0], xs[0]
	}
	mean, s := stat.MeanStdDev(xs, nil) // s with n−1 in the denominator
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(n - 1)}.Quantile(1 - (1-Confidence)/2)
	h := t * s / math.Sqrt(float64(n))
	return mean, mean - h, mean + h
}

func finalKeys(r Result) []string {
	keys := make([]string, 0, len(r.Final))
	for k := range r.Final {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// WriteTable writes rows as an aligned text table with a header naming
// metric: one line per variant, "mean ± half-width [lo, hi] (n)", or for
// a variant of one run "mean (one seed: an interval needs two)" — one
// value has no spread to make an interval of, and "± 0" would claim
// certainty. Values get 4 decimals, more when a mean or half-width is
// below 0.01 so that it keeps two significant digits (at most 8).
func WriteTable(w io.Writer, rows []Row, metric string) error {
	if metric == "" {
		return errors.New("ablation: WriteTable: empty metric name")
	}
	d := decimals(rows)
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', d, 64) }
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "variant\t%s: mean ± 95%% CI\t[lo, hi]\t(n)\n", metric)
	for _, r := range rows {
		if r.N < 2 {
			fmt.Fprintf(tw, "%s\t%s (one seed: an interval needs two)\t-\t(%d)\n", r.Variant, f(r.Mean), r.N)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s ± %s\t[%s, %s]\t(%d)\n", r.Variant, f(r.Mean), f(r.HalfWidth()), f(r.Lo), f(r.Hi), r.N)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("ablation: WriteTable: %w", err)
	}
	return nil
}

// decimals is the number of decimals that shows every non-zero mean and
// half-width of rows with two significant digits: 4 at least, 8 at most.
func decimals(rows []Row) int {
	d := 4
	for _, r := range rows {
		for _, v := range []float64{r.Mean, r.HalfWidth()} {
			if a := math.Abs(v); a > 0 && !math.IsInf(a, 0) {
				// A value in [10^−k, 10^−k+1) needs k+1 decimals for two digits.
				d = max(d, int(-math.Floor(math.Log10(a)))+1)
			}
		}
	}
	return min(d, 8)
}
