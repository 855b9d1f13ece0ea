package main

import (
	"github.com/spf13/cobra"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "gradwire",
		Short: "Data-parallel training with compressed gradient exchange",
		Long: `gradwire trains MLP, LeNet-5, ResNet and LSTM models on MNIST, Fashion-MNIST,
CIFAR-10/100 and a character corpus from YAML config files, and writes each run's
resolved config, metrics, checkpoints and summary to a run directory.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			watchesContext.Store(cmd.Annotations[watchesContextAnnotation] == "true")
		},
	}
	root.AddCommand(newTrainCmd(), newSweepCmd(), newReportCmd(), newBenchCmd(), newTimeModelCmd(), newStragglersCmd(), newCodedCmd(), newMeasureCmd(), newInfluenceCmd(), newDataCmd(), newVersionCmd())
	rejectUnknownSubcommands(root)
	return root
}
