package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/tapml/tapml/internal/atomicfile"
	"github.com/tapml/tapml/ir"
)

func init() {
	var (
		out string
		mi  modelInputs
	)
	cmd := &cobra.Command{
		Use:   "import [MODEL] -o model.tir",
		Short: "Import a model and write its IR as text",
		Long: `Import a model (recognised by content) and write its IR in tapml's text form.
Weights stay in the model file: the text names them and records the model's
absolute path as meta "source", so 'tapmlc run model.tir' finds them. An
ONNX model's dynamic dims need --input-shape NAME=D0,D1,... (recorded in the
text, so the weights are found again with the same shapes). Without MODEL,
the built-in tiny model is imported.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("import: -o FILE is required")
			}
			model, _, err := loadModel(args, "", &mi)
			if err != nil {
				return err
			}
			if model.Format != "builtin" {
				abs, err := filepath.Abs(model.Path)
				if err != nil {
					return err
				}
				model.Module.Meta["source"] = abs
			}
			return atomicfile.WriteFile(out, []byte(ir.Text(model.Module)))
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "the IR text file to write")
	mi.registerShapes(cmd.Flags())
	rootCmd.AddCommand(cmd)
}
