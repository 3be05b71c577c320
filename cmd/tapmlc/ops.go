package main

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/tapml/tapml/frontend/onnx"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime/target"
)

func init() {
	var verbose, onnxOps bool
	cmd := &cobra.Command{
		Use:   "ops [--onnx]",
		Short: "List every op and the targets that implement it (--onnx: every ONNX op the importer reads)",
		Long: `List every op of tapml's IR with its kind and the targets that have a kernel
for it (-v adds its semantics). With --onnx, list instead every ONNX op of the
default domain the importer reads, with the opsets it reads it in, and
how (what it becomes in the IR).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if onnxOps {
				return listONNXOps()
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintf(w, "OP\tKIND\t%s", strings.ToUpper(strings.Join(target.Names, "\t")))
			if verbose {
				fmt.Fprint(w, "\tEFFECTS\tIN PLACE\tROUTED BY\tCOMPUTE\tNUMERICS\tCHAIN\tTRANSCENDENTALS\tSUM LENGTH\tCOST\tSTORED INPUT\tSEMANTICS")
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
					fmt.Fprintf(w, "\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", d.Effects, d.InPlace, d.Routing, d.Compute, d.Numerics.Doc,
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
	cmd.Flags().BoolVar(&onnxOps, "onnx", false, "list the ONNX ops the importer reads and their opsets")
	rootCmd.AddCommand(cmd)
}

// listONNXOps prints every ONNX op the importer reads with its opsets.
func listONNXOps() error {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "ONNX OP\tOPSETS")
	ops := onnx.Ops()
	for _, o := range ops {
		fmt.Fprintf(w, "%s\t%d-%d\n", o.Name, o.Since, o.Until)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%d ONNX ops of the default domain, opsets %d to %d; If, Loop and Scan are flattened and RNN, GRU and LSTM unrolled at import (see frontend/onnx)\n",
		len(ops), onnx.MinOpset, onnx.MaxOpset)
	return nil
}
