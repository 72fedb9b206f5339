package gpu

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy/backend"
)

type foreignBuf struct{}

func (foreignBuf) Len() int { return 1 }

func TestResolve(t *testing.T) {
	a, b := &Backend{}, &Backend{}
	buf := &buffer{owner: a, n: 3, ptr: 0x100}
	got, err := resolve(a, "x", buf)
	require.NoError(t, err)
	require.Same(t, buf, got)
	got, err = resolve(a, "x", nil)
	require.NoError(t, err)
	require.Nil(t, got)
	_, err = resolve(b, "x", buf)
	require.ErrorIs(t, err, backend.ErrBuffer, "buffer of another backend")
	_, err = resolve(a, "x", foreignBuf{})
	require.ErrorIs(t, err, backend.ErrBuffer)
	_, err = resolve(a, "x", (*buffer)(nil))
	require.ErrorIs(t, err, backend.ErrBuffer)
	buf.freed.Store(true)
	_, err = resolveAll(a, "op", nil, buf)
	require.ErrorIs(t, err, backend.ErrBuffer)
	require.Contains(t, err.Error(), "op argument 2")
}

func TestRangeErr(t *testing.T) {
	require.NoError(t, rangeErr("u", 0, 0, 0))
	require.NoError(t, rangeErr("u", 2, 3, 5))
	require.ErrorIs(t, rangeErr("u", 3, 3, 5), backend.ErrShape)
	require.ErrorIs(t, rangeErr("u", -1, 1, 5), backend.ErrShape)
	require.ErrorIs(t, rangeErr("u", 0, -1, 5), backend.ErrShape)
	require.ErrorIs(t, rangeErr("u", 6, 0, 5), backend.ErrShape)
	// No overflow for huge offsets.
	require.ErrorIs(t, rangeErr("u", 1<<62, 1<<62, 5), backend.ErrShape)
}
