package agentrl

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentrl/agentrl/checkpoint"
	"github.com/agentrl/agentrl/dist"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSaveShardedFailures: the ranks writing a sharded checkpoint
// together end together. Every rank's shard is in the committed folder
// when all succeed; when one rank's write fails, or rank 0 cannot make
// the folder, every rank fails at once (long before the one-minute
// timeout a rank waiting for a collective that never comes would hit),
// naming the rank, and nothing is committed.
func TestSaveShardedFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		failOn int    // the rank whose write fails, −1 none
		badDir bool   // the checkpoints' root is a file: rank 0 fails
		want   string // the other ranks' errors contain it
		own    string // and the failing rank's
	}{
		{name: "every rank writes", failOn: -1},
		{name: "rank 1's write fails", failOn: 1, want: "writing the checkpoint's shards failed on rank(s) [1]", own: "disk full"},
		{name: "rank 0's write fails", failOn: 0, want: "writing the checkpoint's shards failed on rank(s) [0]", own: "disk full"},
		{name: "no folder", failOn: -1, badDir: true, want: "making the checkpoint's folder failed on rank(s) [0]", own: "not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := checkpoint.Root{Dir: filepath.Join(t.TempDir(), "ckpt")}
			if tc.badDir {
				require.NoError(t, os.WriteFile(root.Dir, []byte("a file"), 0o644))
			}
			comms, err := dist.NewGroup(context.Background(), 2, dist.GroupOptions{Timeout: time.Minute})
			require.NoError(t, err)
			dirs := make([]string, 2)
			errs := make([]error, 2)
			start := time.Now()
			var wg sync.WaitGroup
			for r := range 2 {
				wg.Go(func() {
					j, err := newJob(DataParallel{Comm: comms[r], ZeRO: ShardGradients}, "DataParallel")
					if err != nil {
						errs[r] = err
						return
					}
					dirs[r], errs[r] = j.(*ranks).saveSharded(context.Background(), root, 3, 0, func(dir string) error {
						if r == tc.failOn {
							return errors.New("disk full")
						}
						return os.WriteFile(filepath.Join(dir, "shard-"+string(rune('0'+r))), []byte{byte(r)}, 0o644)
					})
				})
			}
			wg.Wait()
			for _, c := range comms {
				_ = c.Close()
			}
			assert.Less(t, time.Since(start), 10*time.Second, "the ranks end together, not at the timeout")
			if tc.want == "" {
				require.NoError(t, errors.Join(errs...))
				assert.Equal(t, dirs[0], dirs[1])
				assert.Equal(t, filepath.Join(root.Dir, checkpoint.DirName(3)), dirs[0])
				for _, f := range []string{"shard-0", "shard-1"} {
					assert.FileExists(t, filepath.Join(dirs[0], f))
				}
				return
			}
			failing := tc.failOn
			if tc.badDir {
				failing = 0
			}
			for r, err := range errs {
				require.Error(t, err, "rank %d", r)
				if r != failing {
					assert.Contains(t, err.Error(), tc.want, "rank %d", r)
				} else {
					assert.Contains(t, err.Error(), tc.own, "rank %d", r)
				}
				assert.Empty(t, dirs[r], "rank %d", r)
			}
			if !tc.badDir {
				_, err := os.Stat(filepath.Join(root.Dir, checkpoint.DirName(3)))
				assert.True(t, os.IsNotExist(err), "nothing committed")
			}
		})
	}
}
