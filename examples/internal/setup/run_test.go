package setup

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRunExitStatus(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	errBody := errors.New("no checkpoint")
	for _, tc := range []struct {
		name      string
		ctx       context.Context
		parseErr  error
		bodyErr   error
		want      int
		wantError string // the exact stderr
	}{
		{"success", context.Background(), nil, nil, 0, ""},
		{"help", context.Background(), flag.ErrHelp, nil, 0, ""},
		{"bad flags", context.Background(), errors.New("-n 0: want ≥ 1"), nil, 2, "prog: -n 0: want ≥ 1\nrun 'prog -h' for the usage and every flag\n"},
		{"failure", context.Background(), nil, errBody, 1, "prog: no checkpoint\n"},
		{"interrupted", cancelled, nil, errBody, 1, "prog: interrupted: no checkpoint\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			ran := false
			parse := func(args []string, _ io.Writer) (string, error) { return args[0], tc.parseErr }
			body := func(_ context.Context, o string, _, _ io.Writer) error {
				ran = true
				assert.Equal(t, "x", o, "body gets the parsed options")
				return tc.bodyErr
			}
			assert.Equal(t, tc.want, Run(tc.ctx, "prog", []string{"x"}, &stdout, &stderr, parse, body))
			assert.Equal(t, tc.wantError, stderr.String())
			assert.Equal(t, tc.parseErr == nil, ran, "body runs only after a clean parse")
		})
	}
}
