package main

import (
	"fmt"
	"math"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// numberRule is the range a numeric flag must be in; flags of that name
// are checked in every command that has one.
type numberRule struct {
	lo, hi float64
	loOpen bool // lo itself is outside
	what   string
}

// numberRules is the one place numeric flags are validated: NaN and
// infinities are refused everywhere, and each flag has its range.
var numberRules = map[string]numberRule{
	"temperature":     {0, 1e6, false, "a number >= 0 (0 is greedy)"},
	"top-p":           {0, 1, true, "a number in (0, 1]"},
	"steps":           {0, math.MaxInt32, false, "a whole number >= 0 (0: the context length)"},
	"keep":            {1, math.MaxInt32, false, "a whole number >= 1"},
	"weight-cache-mb": {0, 1 << 30, false, "a whole number of MiB >= 0"},
	"memory-mb":       {1, 1 << 30, false, "a whole number of MiB >= 1"},
	"max-sessions":    {1, 1 << 16, false, "a whole number >= 1"},
	"max-conns":       {1, 1 << 16, false, "a whole number >= 1"},
	"max-logit-err":   {0, math.MaxFloat64, false, "a finite number >= 0"},
	"max-kl":          {0, math.MaxFloat64, false, "a finite number >= 0"},
}

// checkNumbers validates the numeric flags cmd was given (and their
// defaults).
func checkNumbers(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		r, ok := numberRules[f.Name]
		if !ok || err != nil {
			return
		}
		v, perr := strconv.ParseFloat(f.Value.String(), 64)
		bad := perr != nil || math.IsNaN(v) || v < r.lo || v > r.hi || (r.loOpen && v == r.lo)
		if bad {
			err = fmt.Errorf("--%s %s: must be %s", f.Name, f.Value.String(), r.what)
		}
	})
	return err
}

func init() {
	rootCmd.PersistentPreRunE = func(cmd *cobra.Command, args []string) error { return checkNumbers(cmd) }
}
