package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gradwire/gradwire/data"
)

func newDataCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "data",
		Short: "Find and download data sets",
		Long: `Data sets are looked up, in order, in data.dir from the config (and its
<name>/ subfolder), in $GRADWIRE_DATA/<name>, and in /usr/share/datasets/<name>
(where Debian's dataset-fashion-mnist package installs). Known data sets: ` + strings.Join(data.Names(), ", ") + ".",
	}
	cmd.AddCommand(newDataFetchCmd(), newDataListCmd())
	return cmd
}

func defaultDataDir() string {
	if d := os.Getenv("GRADWIRE_DATA"); d != "" {
		return d
	}
	return "data-sets"
}

func newDataFetchCmd() *cobra.Command {
	var dir, baseURL string
	cmd := &cobra.Command{
		Use:   "fetch NAME [--dir DIR]",
		Short: "Download a data set from its canonical URLs and verify its checksums",
		Long: `Download a data set into DIR/NAME/ from its canonical URLs, verify every file's
checksum, and write each file atomically (temporary file, then rename). Files already
present with the right checksum are skipped. DIR defaults to $GRADWIRE_DATA, else
./data-sets. Known data sets: ` + strings.Join(data.Names(), ", ") + ".",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if dir == "" {
				dir = defaultDataDir()
			}
			opts := data.FetchOptions{BaseURL: baseURL, Progress: cmd.ErrOrStderr()}
			if err := data.Fetch(cmd.Context(), args[0], dir, opts); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), filepath.Join(dir, args[0]))
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "data root; files go to DIR/NAME/ (default $GRADWIRE_DATA, else ./data-sets)")
	cmd.Flags().StringVar(&baseURL, "base-url", "", "download from this mirror instead of the canonical URL (file names are appended)")
	return cmd
}

func newDataListCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "list [--dir DIR]",
		Short: "List the known data sets and where each one is found",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			for _, name := range data.Names() {
				if path, err := data.Locate(name, dir); err == nil {
					fmt.Fprintf(w, "%-16s %s\n", name, path)
				} else {
					fmt.Fprintf(w, "%-16s not found (gradwire data fetch %s)\n", name, name)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "also look in DIR and DIR/NAME first, as data.dir does")
	return cmd
}
