package dataset

import (
	"errors"
	"fmt"
	"math"
)

// Dynamic sampling, after DAPO (Yu et al. 2025, "DAPO: An Open-Source LLM
// Reinforcement Learning System at Scale", §3.2) as verl implements it in
// recipe/dapo/dapo_ray_trainer.py (RayDAPOTrainer.fit, the
// algorithm.filter_groups branch):
//
//   - trajectories are grouped by prompt (verl's uid); a group whose metric
//     (filter_groups.metric: "acc", "score", "seq_reward" or
//     "seq_final_reward") has zero standard deviation is dropped, since every
//     group-relative advantage in it is zero; a group of one trajectory is
//     kept (verl keeps len == 1);
//   - kept groups accumulate over generation batches until there are
//     train_batch_size of them; when filter_groups.max_num_gen_batches > 0
//     generation batches have been used and there are still too few, verl
//     raises an error (here Add returns ErrTooManyGenBatches);
//   - the training batch is the first train_batch_size kept groups, in
//     arrival order; the kept groups beyond them are discarded, and the
//     counters start again.
//
// Two deliberate differences. Zero variance means "all values equal", tested
// exactly, where verl computes np.std: numpy's mean of equal floats can
// round (np.std([0.1, 0.1, 0.1]) is 1.39e-17 with numpy 1.24), so verl keeps
// such a group by accident; it carries no signal and is dropped here. And the
// batch is cut at whole groups where verl cuts at train_batch_size·n
// trajectories: the same when every group has n trajectories, and never a
// split group (which would change its baseline) when they differ.

// FilterConfig configures a GroupFilter (verl's algorithm.filter_groups).
// BatchGroups is required: the batch size has no default. A zero
// MaxGenBatches is meaningful: no bound, as a non-positive
// max_num_gen_batches is in verl.
type FilterConfig struct {
	// BatchGroups is the number of groups (prompts) a training batch
	// needs: verl's data.train_batch_size. > 0.
	BatchGroups int
	// MaxGenBatches bounds the generation batches that may be added for one
	// training batch; 0 means no bound (verl: max_num_gen_batches <= 0).
	MaxGenBatches int
}

// ErrTooManyGenBatches is returned by Add when MaxGenBatches generation
// batches have been added and fewer than BatchGroups groups were kept: the
// data are too hard or too easy for the policy.
var ErrTooManyGenBatches = errors.New("dataset: dynamic sampling used its generation batches without filling a batch")

// ErrNotReady is returned by Take before BatchGroups groups are kept.
var ErrNotReady = errors.New("dataset: dynamic sampling batch not full")

// DroppedGroup is a group that dynamic sampling filtered out.
type DroppedGroup struct {
	Group string
	// Size is the group's number of trajectories.
	Size int
	// Value is the metric value all of them share (e.g. 1 for a prompt
	// every sample solved, 0 for one none solved).
	Value float64
}

// AddReport says what Add did with one generation batch.
type AddReport struct {
	// GenBatch is the 1-based count of generation batches added since the
	// last Take or Reset, this one included.
	GenBatch         int
	KeptGroups       int
	KeptTrajectories int
	Dropped          []DroppedGroup
	// Ready tells whether enough groups are now kept for Take.
	Ready bool
}

// FilterStats sums up the generation batches behind one training batch.
type FilterStats struct {
	// GenBatches is verl's train/num_gen_batches.
	GenBatches          int
	KeptGroups          int // groups in the training batch
	KeptTrajectories    int
	Dropped             []DroppedGroup // zero-variance groups, in arrival order
	DroppedTrajectories int
	// SurplusGroups were kept but beyond BatchGroups, and discarded.
	SurplusGroups       int
	SurplusTrajectories int
}

// FilteredBatch is a training batch: trajectories group by group, each
// group's trajectories in arrival order, with their group ids and metric
// values aligned.
type FilteredBatch[T any] struct {
	Items  []T
	Groups []string
	Metric []float64
	Stats  FilterStats
}

type keptGroup[T any] struct {
	id     string
	items  []T
	metric []float64
}

// GroupFilter accumulates generation batches and keeps the groups whose
// metric varies, until a training batch is full. T is the trainer's
// trajectory type (or an index). A trainer drives it as:
//
//	for !f.Ready() {
//		trajs := generate(nextPrompts())
//		if _, err := f.Add(trajs, groupIDs, accs); err != nil { ... }
//	}
//	batch, err := f.Take()
//
// It is not safe for concurrent use.
type GroupFilter[T any] struct {
	cfg     FilterConfig
	seen    map[string]bool // group ids of the generation batches since the last Take
	groups  []keptGroup[T]
	stats   FilterStats
	pending int // trajectories in groups
}

// NewGroupFilter makes an empty filter.
func NewGroupFilter[T any](cfg FilterConfig) (*GroupFilter[T], error) {
	if cfg.BatchGroups <= 0 {
		return nil, fmt.Errorf("dataset: filter batch of %d groups", cfg.BatchGroups)
	}
	if cfg.MaxGenBatches < 0 {
		return nil, fmt.Errorf("dataset: filter MaxGenBatches %d < 0", cfg.MaxGenBatches)
	}
	return &GroupFilter[T]{cfg: cfg}, nil
}

// Add filters one generation batch: items[i] belongs to group groups[i] and
// scored metric[i]. A group's trajectories need not be adjacent. Group ids
// must be unique across the generation batches of one training batch, as
// verl's fresh uuid per prompt and generation batch are: an id already seen
// since the last Take is an error, since merging two generations of a
// prompt into one group would change its baseline. Inputs of unequal length,
// an empty batch, an empty group id or a NaN or infinite metric are errors
// too; all of them leave the filter unchanged. When the batch is still not full after MaxGenBatches
// generation batches, Add keeps what it filtered and returns
// ErrTooManyGenBatches.
func (f *GroupFilter[T]) Add(items []T, groups []string, metric []float64) (AddReport, error) {
	if len(items) != len(groups) || len(items) != len(metric) {
		return AddReport{}, fmt.Errorf("dataset: filter: %d items, %d group ids, %d metric values", len(items), len(groups), len(metric))
	}
	if len(items) == 0 {
		return AddReport{}, errors.New("dataset: filter: empty generation batch")
	}
	for i := range items {
		if groups[i] == "" {
			return AddReport{}, fmt.Errorf("dataset: filter: empty group id at %d", i)
		}
		if f.seen[groups[i]] {
			return AddReport{}, fmt.Errorf("dataset: filter: group id %q at %d was used by an earlier generation batch", groups[i], i)
		}
		if math.IsNaN(metric[i]) || math.IsInf(metric[i], 0) {
			return AddReport{}, fmt.Errorf("dataset: filter: metric %v at %d (group %q)", metric[i], i, groups[i])
		}
	}

	index := make(map[string]int)
	var batch []keptGroup[T]
	for i, id := range groups {
		k, ok := index[id]
		if !ok {
			k = len(batch)
			index[id] = k
			batch = append(batch, keptGroup[T]{id: id})
		}
		batch[k].items = append(batch[k].items, items[i])
		batch[k].metric = append(batch[k].metric, metric[i])
	}

	if f.seen == nil {
		f.seen = make(map[string]bool)
	}
	for _, g := range batch {
		f.seen[g.id] = true
	}
	f.stats.GenBatches++
	rep := AddReport{GenBatch: f.stats.GenBatches}
	for _, g := range batch {
		if len(g.metric) > 1 && allEqual(g.metric) {
			d := DroppedGroup{Group: g.id, Size: len(g.items), Value: g.metric[0]}
			rep.Dropped = append(rep.Dropped, d)
			f.stats.Dropped = append(f.stats.Dropped, d)
			f.stats.DroppedTrajectories += len(g.items)
			continue
		}
		rep.KeptGroups++
		rep.KeptTrajectories += len(g.items)
		f.groups = append(f.groups, g)
		f.pending += len(g.items)
	}
	rep.Ready = f.Ready()
	if !rep.Ready && f.cfg.MaxGenBatches > 0 && f.stats.GenBatches >= f.cfg.MaxGenBatches {
		return rep, fmt.Errorf("%w: %d generation batches kept %d of %d groups", ErrTooManyGenBatches, f.stats.GenBatches, len(f.groups), f.cfg.BatchGroups)
	}
	return rep, nil
}

func allEqual(v []float64) bool {
	for _, x := range v[1:] {
		if x != v[0] {
			return false
		}
	}
	return true
}

// Ready reports whether BatchGroups groups are kept.
func (f *GroupFilter[T]) Ready() bool { return len(f.groups) >= f.cfg.BatchGroups }

// KeptGroups is the number of groups kept so far.
func (f *GroupFilter[T]) KeptGroups() int { return len(f.groups) }

// GenBatches is the number of generation batches added since the last Take
// or Reset.
func (f *GroupFilter[T]) GenBatches() int { return f.stats.GenBatches }

// Take returns the training batch — the first BatchGroups kept groups —
// with the statistics of the generation batches behind it, discards the
// surplus groups, and empties the filter. Before Ready it returns
// ErrNotReady and changes nothing.
func (f *GroupFilter[T]) Take() (FilteredBatch[T], error) {
	if !f.Ready() {
		return FilteredBatch[T]{}, fmt.Errorf("%w: %d of %d groups kept", ErrNotReady, len(f.groups), f.cfg.BatchGroups)
	}
	n := 0
	for _, g := range f.groups[:f.cfg.BatchGroups] {
		n += len(g.items)
	}
	out := FilteredBatch[T]{
		Items:  make([]T, 0, n),
		Groups: make([]string, 0, n),
		Metric: make([]float64, 0, n),
	}
	for _, g := range f.groups[:f.cfg.BatchGroups] {
		out.Items = append(out.Items, g.items...)
		out.Metric = append(out.Metric, g.metric...)
		for range g.items {
			out.Groups = append(out.Groups, g.id)
		}
	}
	st := f.stats
	st.KeptGroups = f.cfg.BatchGroups
	st.KeptTrajectories = n
	st.SurplusGroups = len(f.groups) - f.cfg.BatchGroups
	st.SurplusTrajectories = f.pending - n
	out.Stats = st
	f.Reset()
	return out, nil
}

// Reset empties the filter and its counters.
func (f *GroupFilter[T]) Reset() {
	f.groups = nil
	f.seen = nil
	f.stats = FilterStats{}
	f.pending = 0
}
