// Command tapmlc deploys ML models on emerging GPU platforms top-down: it
// runs a model on a reference, carves per-operator tests from that run,
// replays them on a target and migrates the model to the target step by step.
//
// Each subcommand lives in its own file and adds itself to the root command.
// stdout carries results only (the generated text of `run`); logs and
// progress go to stderr.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

var rootCmd = &cobra.Command{
	Use:           "tapmlc",
	Short:         "tapmlc deploys ML models on WebGPU, Vulkan, Metal and native CPU, top-down from a reference run",
	SilenceUsage:  true,
	SilenceErrors: true,
}

func main() {
	if err := rootCmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "tapmlc:", err)
		os.Exit(1)
	}
}
