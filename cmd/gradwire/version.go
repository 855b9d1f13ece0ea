package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gradwire/gradwire/internal/version"
	"github.com/gradwire/gradwire/models"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, Go toolchain and matrix-multiply back-end",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			blas := models.BLAS
			if core := models.BLASCoreType(); core != "" {
				blas += " " + core
			}
			fmt.Fprintf(cmd.OutOrStdout(), "gradwire %s (%s, blas %s)\n", version.String(), version.GoVersion(), blas)
			return nil
		},
	}
}
