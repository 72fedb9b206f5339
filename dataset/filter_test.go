package dataset

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// traj is a stand-in trajectory type: the filter is generic over it.
type traj struct {
	id  string
	acc float64
}

func genBatch(spec map[string][]float64, order []string) ([]traj, []string, []float64) {
	var items []traj
	var groups []string
	var metric []float64
	for _, g := range order {
		for i, v := range spec[g] {
			items = append(items, traj{id: g + "/" + string(rune('a'+i)), acc: v})
			groups = append(groups, g)
			metric = append(metric, v)
		}
	}
	return items, groups, metric
}

func TestGroupFilterVerlSemantics(t *testing.T) {
	// Worked by hand after verl's RayDAPOTrainer.fit, train_batch_size 3,
	// n = 4, max_num_gen_batches 3:
	//   gen batch 1: p1 [1 1 1 1] std 0 -> drop; p2 [0 1 0 0] std>0 -> keep;
	//                p3 [0 0 0 0] std 0 -> drop. kept 1 < 3: keep generating.
	//   gen batch 2: p4 [1 0 1 1] keep; p5 [0.5 0.5 0.5 0.5] drop;
	//                p6 [0 0 1 1] keep. kept 3 >= 3: train on p2, p4, p6.
	f, err := NewGroupFilter[traj](FilterConfig{BatchGroups: 3, MaxGenBatches: 3})
	require.NoError(t, err)

	items, groups, metric := genBatch(map[string][]float64{
		"p1": {1, 1, 1, 1}, "p2": {0, 1, 0, 0}, "p3": {0, 0, 0, 0},
	}, []string{"p1", "p2", "p3"})
	rep, err := f.Add(items, groups, metric)
	require.NoError(t, err)
	assert.Equal(t, AddReport{
		GenBatch: 1, KeptGroups: 1, KeptTrajectories: 4,
		Dropped: []DroppedGroup{{Group: "p1", Size: 4, Value: 1}, {Group: "p3", Size: 4, Value: 0}},
	}, rep)
	assert.False(t, f.Ready())
	_, err = f.Take()
	assert.ErrorIs(t, err, ErrNotReady)

	items, groups, metric = genBatch(map[string][]float64{
		"p4": {1, 0, 1, 1}, "p5": {0.5, 0.5, 0.5, 0.5}, "p6": {0, 0, 1, 1},
	}, []string{"p4", "p5", "p6"})
	rep, err = f.Add(items, groups, metric)
	require.NoError(t, err)
	assert.True(t, rep.Ready)
	assert.Equal(t, 2, rep.GenBatch)

	b, err := f.Take()
	require.NoError(t, err)
	var ids []string
	for _, it := range b.Items {
		ids = append(ids, it.id)
	}
	assert.Equal(t, []string{"p2/a", "p2/b", "p2/c", "p2/d", "p4/a", "p4/b", "p4/c", "p4/d", "p6/a", "p6/b", "p6/c", "p6/d"}, ids)
	assert.Equal(t, []string{"p2", "p2", "p2", "p2", "p4", "p4", "p4", "p4", "p6", "p6", "p6", "p6"}, b.Groups)
	assert.Equal(t, []float64{0, 1, 0, 0, 1, 0, 1, 1, 0, 0, 1, 1}, b.Metric)
	assert.Equal(t, FilterStats{
		GenBatches: 2, KeptGroups: 3, KeptTrajectories: 12,
		Dropped:             []DroppedGroup{{"p1", 4, 1}, {"p3", 4, 0}, {"p5", 4, 0.5}},
		DroppedTrajectories: 12,
	}, b.Stats)

	// Take emptied the filter and its counters.
	assert.Equal(t, 0, f.KeptGroups())
	assert.Equal(t, 0, f.GenBatches())
	assert.False(t, f.Ready())
}

func TestGroupFilterSurplusAndInterleaving(t *testing.T) {
	// Two groups wanted; one generation batch keeps three, trajectories of
	// each group not adjacent. The batch is the first two groups to appear
	// (q, r), each in arrival order; s is surplus and discarded, as verl
	// cuts batch[:train_batch_size * n].
	f, err := NewGroupFilter[int](FilterConfig{BatchGroups: 2})
	require.NoError(t, err)
	items := []int{0, 1, 2, 3, 4, 5, 6}
	groups := []string{"q", "r", "q", "s", "r", "s", "q"}
	metric := []float64{1, 0, 0, 1, 1, 0, 1}
	_, err = f.Add(items, groups, metric)
	require.NoError(t, err)
	b, err := f.Take()
	require.NoError(t, err)
	assert.Equal(t, []int{0, 2, 6, 1, 4}, b.Items)
	assert.Equal(t, []string{"q", "q", "q", "r", "r"}, b.Groups)
	assert.Equal(t, []float64{1, 0, 1, 0, 1}, b.Metric)
	assert.Equal(t, 1, b.Stats.SurplusGroups)
	assert.Equal(t, 2, b.Stats.SurplusTrajectories)
	assert.Equal(t, 5, b.Stats.KeptTrajectories)
}

func TestGroupFilterSingletonKept(t *testing.T) {
	// verl keeps a group of one (std of one value is 0, but len == 1 passes).
	f, err := NewGroupFilter[int](FilterConfig{BatchGroups: 1})
	require.NoError(t, err)
	rep, err := f.Add([]int{7}, []string{"solo"}, []float64{1})
	require.NoError(t, err)
	assert.Equal(t, 1, rep.KeptGroups)
	assert.Empty(t, rep.Dropped)
}

func TestGroupFilterZeroVarianceIsExactEquality(t *testing.T) {
	// numpy 1.24.2 (Debian python3-numpy): np.std([0.1, 0.1, 0.1]) ==
	// 1.3877787807814457e-17 > 0, so verl would keep this group; it is
	// dropped here (see the package notes). A difference of one ulp is kept.
	f, err := NewGroupFilter[int](FilterConfig{BatchGroups: 5})
	require.NoError(t, err)
	rep, err := f.Add(
		[]int{0, 1, 2, 3, 4, 5, 6, 7},
		[]string{"a", "a", "a", "b", "b", "c", "c", "c"},
		[]float64{0.1, 0.1, 0.1, 0.3, math.Nextafter(0.3, 1), 0, math.Copysign(0, -1), 0},
	)
	require.NoError(t, err)
	assert.Equal(t, []DroppedGroup{{"a", 3, 0.1}, {"c", 3, 0}}, rep.Dropped)
	assert.Equal(t, 1, rep.KeptGroups)
}

func TestGroupFilterMaxGenBatches(t *testing.T) {
	f, err := NewGroupFilter[int](FilterConfig{BatchGroups: 2, MaxGenBatches: 2})
	require.NoError(t, err)
	_, err = f.Add([]int{0, 1}, []string{"a", "a"}, []float64{1, 0}) // kept
	require.NoError(t, err)
	rep, err := f.Add([]int{2, 3}, []string{"b", "b"}, []float64{1, 1}) // dropped
	assert.ErrorIs(t, err, ErrTooManyGenBatches)
	assert.ErrorContains(t, err, "2 generation batches kept 1 of 2 groups")
	assert.Equal(t, 2, rep.GenBatch)
	assert.Equal(t, 1, f.KeptGroups())
	f.Reset()
	assert.Equal(t, 0, f.GenBatches())

	// MaxGenBatches 0: no bound (verl's max_num_gen_batches <= 0).
	f, err = NewGroupFilter[int](FilterConfig{BatchGroups: 1})
	require.NoError(t, err)
	for i := range 50 {
		id := string(rune('A' + i))
		_, err := f.Add([]int{i, i}, []string{id, id}, []float64{0, 0})
		require.NoError(t, err)
	}
	assert.Equal(t, 50, f.GenBatches())
}

func TestGroupFilterBadInput(t *testing.T) {
	f, err := NewGroupFilter[int](FilterConfig{BatchGroups: 2})
	require.NoError(t, err)
	cases := []struct {
		name   string
		items  []int
		groups []string
		metric []float64
		msg    string
	}{
		{"length mismatch", []int{1, 2}, []string{"a"}, []float64{1, 2}, "2 items, 1 group ids, 2 metric values"},
		{"empty", nil, nil, nil, "empty generation batch"},
		{"empty id", []int{1}, []string{""}, []float64{1}, "empty group id at 0"},
		{"nan", []int{1, 2}, []string{"a", "a"}, []float64{1, math.NaN()}, `metric NaN at 1 (group "a")`},
		{"inf", []int{1}, []string{"a"}, []float64{math.Inf(-1)}, "metric -Inf at 0"},
	}
	for _, c := range cases {
		_, err := f.Add(c.items, c.groups, c.metric)
		assert.ErrorContains(t, err, c.msg, c.name)
		assert.Equal(t, 0, f.GenBatches(), "%s: a rejected batch changes nothing", c.name)
	}

	// A group id reused across generation batches would merge two groups.
	_, err = f.Add([]int{1, 2}, []string{"a", "a"}, []float64{0, 1})
	require.NoError(t, err)
	_, err = f.Add([]int{3, 4}, []string{"a", "a"}, []float64{0, 1})
	assert.ErrorContains(t, err, `group id "a" at 0 was used by an earlier generation batch`)
	assert.Equal(t, 1, f.GenBatches())

	_, err = NewGroupFilter[int](FilterConfig{})
	assert.Error(t, err)
	_, err = NewGroupFilter[int](FilterConfig{BatchGroups: 1, MaxGenBatches: -1})
	assert.Error(t, err)
}
