package loss_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/loss"
)

// rollcorrGolden mirrors testdata/rollcorr_golden.json, written by
// testdata/gen_rollcorr.py: verl's rollout correction re-implemented in
// PyTorch 1.13 (Debian python3-torch), float64 autograd, and checked there
// against verl's own rollout_corr_helper.py and debug/metrics.py run in
// float32 (gen_rollcorr.py --verl).
type rollcorrGolden struct {
	Batches []goldenBatch
	Cases   []struct {
		Index             int
		Batch             int
		Agg               loss.Agg
		EntropyCoef       float64 `json:"entropy_coef"`
		KLCoef            float64 `json:"kl_coef"`
		RolloutCorrection struct {
			RolloutIS               loss.ISLevel    `json:"rollout_is"`
			RolloutISThreshold      float64         `json:"rollout_is_threshold"`
			RolloutISBatchNormalize bool            `json:"rollout_is_batch_normalize"`
			RolloutRS               string          `json:"rollout_rs"`
			RolloutRSThreshold      json.RawMessage `json:"rollout_rs_threshold"`
			BypassMode              bool            `json:"bypass_mode"`
			LossType                loss.BypassLoss `json:"loss_type"`
		} `json:"rollout_correction"`
		goldenResult
	}
	Mismatch []struct {
		Batch   int
		Sources []string
		Metrics map[string]float64
	}
}

// threshold reads rollout_rs_threshold, a string or a number in verl's
// configurations, as the string RolloutCorrection holds.
func threshold(t *testing.T, raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var f float64
	require.NoError(t, json.Unmarshal(raw, &f))
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// near9 reports whether got is within 1e-9 of want, absolutely or
// relative to |want|: both sides compute in float64 from the same float32
// inputs.
func near9(got, want float64) bool { return math.Abs(got-want) <= 1e-9*math.Max(1, math.Abs(want)) }

func TestRolloutCorrectionGoldenPyTorch(t *testing.T) {
	raw, err := os.ReadFile("testdata/rollcorr_golden.json")
	require.NoError(t, err)
	var g rollcorrGolden
	require.NoError(t, json.Unmarshal(raw, &g))
	require.Len(t, g.Cases, 24)
	c := loss.NewComputer(nil)
	for _, tc := range g.Cases {
		rc := tc.RolloutCorrection
		name := fmt.Sprintf("%d/%s@%s/is=%s/bypass=%v/%s", tc.Index, rc.RolloutRS, threshold(t, rc.RolloutRSThreshold), rc.RolloutIS, rc.BypassMode, rc.LossType)
		t.Run(name, func(t *testing.T) {
			bt := g.Batches[tc.Batch]
			b := bt.batch()
			if rc.BypassMode { // the rollout's log-probs are the old ones
				b.OldLogProbs = dense32(bt.B, bt.T, bt.Rollout)
			}
			cfg := loss.Config{ClipLow: 0.2, ClipHigh: 0.28, ClipC: 3, Agg: tc.Agg, KLType: loss.KLK3,
				EntropyCoef: tc.EntropyCoef, KLCoef: tc.KLCoef, RolloutCorrection: loss.RolloutCorrection{
					RolloutIS: rc.RolloutIS, RolloutISThreshold: rc.RolloutISThreshold, RolloutISBatchNormalize: rc.RolloutISBatchNormalize,
					RolloutRS: rc.RolloutRS, RolloutRSThreshold: threshold(t, rc.RolloutRSThreshold), BypassMode: rc.BypassMode, LossType: rc.LossType}}
			res, err := c.Compute(cfg, b)
			require.NoError(t, err)
			tc.check(t, res, bt.T, near9)
			assert.Equal(t, prefixed(tc.Metrics, "rollout_corr/"), prefixed(res.Metrics, "rollout_corr/"), "the rollout_corr/ keys")
		})
	}
	for _, mm := range g.Mismatch {
		t.Run(fmt.Sprintf("mismatch/%d", mm.Batch), func(t *testing.T) {
			bt := g.Batches[mm.Batch]
			rows := func(v []float64) [][]float32 {
				out := make([][]float32, bt.B)
				for r := range out {
					for _, x := range v[r*bt.T : (r+1)*bt.T] {
						out[r] = append(out[r], float32(x))
					}
				}
				return out
			}
			got, err := loss.MismatchMetrics(rows(bt.Old), rows(bt.Rollout), rows(bt.Mask), mm.Sources)
			require.NoError(t, err)
			assert.Equal(t, prefixed(mm.Metrics, ""), prefixed(got, ""))
			for k, want := range mm.Metrics {
				assert.Truef(t, near9(got[k], want), "%s = %v, torch %v", k, got[k], want)
			}
		})
	}
}

// prefixed lists m's keys that start with prefix, sorted.
func prefixed(m map[string]float64, prefix string) []string {
	var keys []string
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}
