package main

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime/target"
)

func init() {
	var verbose bool
	cmd := &cobra.Command{
		Use:   "ops",
		Short: "List every op and the targets that implement it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintf(w, "OP\tKIND\t%s", strings.ToUpper(strings.Join(target.Names, "\t")))
			if verbose {
				fmt.Fprint(w, "\tEFFECTS\tIN PLACE\tCOMPUTE\tNUMERICS\tCHAIN\tTRANSCENDENTALS\tSUM LENGTH\tCOST\tSTORED INPUT\tSEMANTICS")
			}
			fmt.Fprintln(w)
			missing := 0
			for _, d := range ir.Ops() {
				fmt.Fprintf(w, "%s\t%s", d.Name, d.Kind)
				for _, t := range target.Names {
					mark := "yes"
					if !target.Supports(t, d.Op) {
						mark = "-"
						missing++
					}
					fmt.Fprintf(w, "\t%s", mark)
				}
				if verbose {
					fmt.Fprintf(w, "\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", d.Effects, d.InPlace, d.Compute, d.Numerics.Doc,
						d.ChainLength.Doc, d.Transcendentals.Doc, d.SumLength.Doc, d.Cost.Doc, d.Storage.Doc, d.Doc)
				}
				fmt.Fprintln(w)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "%d ops, %d targets, %d missing kernels\n", len(ir.Ops()), len(target.Names), missing)
			return nil
		},
	}
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "also print each op's facts (ir.Facts) and semantics")
	rootCmd.AddCommand(cmd)
}
