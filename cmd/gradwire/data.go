package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gradwire/gradwire/data"
)

func newDataCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "data",
		Short: "Find, check and download data sets",
		Long: `Each split of a data set is looked up, in order, in data.dir from the config (its
<name>/ subfolder, then the folder itself), in $GRADWIRE_DATA/<name>, and in
/usr/share/datasets/<name> (where Debian's dataset-fashion-mnist package installs);
for CIFAR also in the folder its archive extracts to inside each. The first folder
holding every file of the split is used. A data.dir that is not an existing folder is
an error. Known data sets: ` + strings.Join(data.Names(), ", ") + ".",
	}
	cmd.AddCommand(newDataFetchCmd(), newDataListCmd())
	return cmd
}

func defaultDataDir() string {
	if d := os.Getenv(data.EnvDataDir); d != "" {
		return d
	}
	return "data-sets"
}

func newDataFetchCmd() *cobra.Command {
	var dir, baseURL string
	cmd := &cobra.Command{
		Annotations: map[string]string{watchesContextAnnotation: "true"},
		Use:         "fetch NAME [--dir DIR] [--base-url URL]",
		Short:       "Download a data set and verify it",
		Long: `Download a data set into DIR/NAME/ from its canonical URLs, or from a mirror given
by --base-url, verify every file, and write each one atomically (temporary file, then
rename). A gzip file is accepted when its checksum is the publisher's or, for
Fashion-MNIST and the MNIST test split, when it decompresses to the canonical content
(so Debian's recompressed files pass, and uncompressed copies without .gz). Files
already present and accepted are skipped; CIFAR files are skipped when all have their
expected sizes. DIR defaults to $GRADWIRE_DATA, else ./data-sets; training finds it
through data.dir or $GRADWIRE_DATA.

When the server cannot be reached, the error says how else to get the files: a
mirror, copying them by hand into DIR/NAME/, or for Fashion-MNIST Debian's
dataset-fashion-mnist package. A failed fetch leaves no partial file and removes the
folders it created; files it verified before the failure are kept, so running it
again downloads only the rest. Known data sets: ` + strings.Join(data.Names(), ", ") + ".",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("data fetch needs one argument, the data set's name (got %d): one of %s", len(args), strings.Join(data.Names(), ", "))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if dir == "" {
				dir = defaultDataDir()
			}
			if err := folderFlag("--dir", dir); err != nil {
				return err
			}
			opts := data.FetchOptions{BaseURL: baseURL, Progress: cmd.ErrOrStderr()}
			if err := data.Fetch(cmd.Context(), args[0], dir, opts); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), filepath.Join(dir, args[0]))
			if os.Getenv(data.EnvDataDir) != dir {
				fmt.Fprintf(cmd.ErrOrStderr(), "to train with it, set data.dir: %s in the config, or %s=%s\n", dir, data.EnvDataDir, dir)
			}
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
		Short: "Show each data set's train and test split: where it is and how many examples it has",
		Long: `Open the train and test split of every known data set as training would, and print
one line per split: the number of examples (characters for text) and the folder it is
read from; or "missing" with the files a folder must hold; or why the split cannot be
used (a damaged file, or splits whose images differ in shape). Opening reads every
file in full.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir != "" {
				if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
					return fmt.Errorf("--dir %s: not an existing folder", dir)
				}
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			for _, name := range data.Names() {
				splits, err := data.Survey(data.Options{Name: name, Dir: dir})
				if err != nil {
					return err
				}
				info, _ := data.Lookup(name)
				for _, s := range splits {
					fmt.Fprintf(w, "%s\t%s\t%s\n", name, s.Split, splitLine(info, s))
				}
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "look in DIR/NAME, then DIR, before the other places, as data.dir does")
	return cmd
}

// splitLine words what Survey found for one split.
func splitLine(info data.Info, s data.SplitStatus) string {
	switch {
	case errors.Is(s.Err, data.ErrNotFound):
		files := info.Train
		if s.Split == "test" {
			files = info.Test
		}
		raw := ""
		if strings.HasSuffix(files[0], ".gz") {
			raw = ", each gzipped or not"
		}
		return fmt.Sprintf("missing\t(no folder holds %s%s; gradwire data fetch %s)", strings.Join(files, ", "), raw, info.Name)
	case s.Err != nil:
		return "unusable\t" + s.Err.Error()
	case info.Shape == nil:
		return fmt.Sprintf("%d characters\t%s", s.Examples, s.Dir)
	}
	return fmt.Sprintf("%d examples\t%s", s.Examples, s.Dir)
}
