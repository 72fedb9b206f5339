package setup

import (
	"bytes"
	"context"
	"flag"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParse checks what a program prints for each kind of command line:
// -h the synopsis and every flag; a mistake nothing while parsing, then,
// through Run, the cause first and one line pointing to -h.
func TestParse(t *testing.T) {
	const help = "usage: prog -in FILE [flags]\n" +
		"  -in string\n    \tinput file\n" +
		"  -n int\n    \tcount (default 1)\n"
	const pointer = "run 'prog -h' for the usage and every flag\n"
	for _, c := range []struct {
		name       string
		args       []string
		wantErr    string // the error of Parse; "" for none
		wantParse  string // stderr after Parse
		wantStatus int    // Run's exit status
		wantRun    string // stderr after Run
	}{
		{"fine", []string{"-in", "x", "-n", "2"}, "", "", 0, ""},
		{"help", []string{"-h"}, flag.ErrHelp.Error(), help, 0, help},
		{"long help", []string{"-help"}, flag.ErrHelp.Error(), help, 0, help},
		{"unknown flag", []string{"-x"}, "flag provided but not defined: -x", "", 2, "prog: flag provided but not defined: -x\n" + pointer},
		{"bad value", []string{"-n", "two"}, `invalid value "two" for flag -n: parse error`, "", 2, "prog: invalid value \"two\" for flag -n: parse error\n" + pointer},
		{"no value", []string{"-in"}, "flag needs an argument: -in", "", 2, "prog: flag needs an argument: -in\n" + pointer},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stderr bytes.Buffer
			fs := NewFlagSet("prog", "prog -in FILE [flags]", &stderr)
			fs.String("in", "", "input file")
			fs.Int("n", 1, "count")
			err := Parse(fs, c.args)
			if c.wantErr == "" {
				require.NoError(t, err)
			} else {
				require.EqualError(t, err, c.wantErr)
			}
			assert.Equal(t, c.wantParse, stderr.String())
			// The same through Run, as a program's parse function.
			stderr.Reset()
			parse := func(args []string, stderr io.Writer) (string, error) {
				fs := NewFlagSet("prog", "prog -in FILE [flags]", stderr)
				fs.String("in", "", "input file")
				fs.Int("n", 1, "count")
				return "", Parse(fs, args)
			}
			body := func(context.Context, string, io.Writer, io.Writer) error { return nil }
			assert.Equal(t, c.wantStatus, Run(context.Background(), "prog", c.args, io.Discard, &stderr, parse, body))
			assert.Equal(t, c.wantRun, stderr.String())
		})
	}
}

// TestZeROFlag: -zero takes the stages 0, 1 and 2 and refuses anything
// else at parse time, naming the flag.
func TestZeROFlag(t *testing.T) {
	for _, c := range []struct {
		args    []string
		want    int
		wantErr string
	}{
		{nil, 0, ""},
		{[]string{"-zero", "0"}, 0, ""},
		{[]string{"-zero", "1"}, 1, ""},
		{[]string{"-zero=2"}, 2, ""},
		{[]string{"-zero", "3"}, 0, `invalid value "3" for flag -zero: "3": want 0, 1 or 2`},
		{[]string{"-zero", "-1"}, 0, `invalid value "-1" for flag -zero: "-1": want 0, 1 or 2`},
		{[]string{"-zero", "two"}, 0, `invalid value "two" for flag -zero: "two": want 0, 1 or 2`},
	} {
		fs := NewFlagSet("prog", "prog", io.Discard)
		var stage int
		ZeROFlag(fs, &stage)
		err := Parse(fs, c.args)
		if c.wantErr != "" {
			assert.EqualError(t, err, c.wantErr, "%q", c.args)
			continue
		}
		require.NoError(t, err, "%q", c.args)
		assert.Equal(t, c.want, stage, "%q", c.args)
	}
}
