package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

// runDirArgs accepts at least one argument (exactly one when single), each a run
// directory, and says so, with an example, when the count is wrong.
func runDirArgs(command string, single bool) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		example := "experiments/results/<sweep>/runs/<variation>/seed-1"
		switch {
		case single && len(args) != 1:
			return fmt.Errorf("%s needs one argument, a run directory RUN_DIR (got %d), e.g. gradwire %s %s", command, len(args), command, example)
		case len(args) == 0:
			return fmt.Errorf("%s needs at least one run directory RUN_DIR, e.g. gradwire %s %s", command, command, example)
		}
		return nil
	}
}

// checkRunDirs refuses, before any work starts, an argument that is not a run
// directory (a folder holding the config.yaml that gradwire train writes), and
// one named twice.
func checkRunDirs(command string, dirs []string) error {
	seen := map[string]string{}
	for _, d := range dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", command, d, err)
		}
		if first, ok := seen[abs]; ok {
			return fmt.Errorf("%s: %s names the run %s again: expected each run once", command, d, first)
		}
		seen[abs] = d
	}
	for _, d := range dirs {
		st, err := os.Stat(d)
		if err != nil || !st.IsDir() {
			return fmt.Errorf("%s: %s is not a folder: expected a run directory (what gradwire train --out or a sweep's runs/<variation>/seed-<k> holds)", command, d)
		}
		if _, err := os.Stat(filepath.Join(d, "config.yaml")); err != nil {
			return fmt.Errorf("%s: %s holds no config.yaml: expected a run directory (what gradwire train --out or a sweep's runs/<variation>/seed-<k> holds)", command, d)
		}
	}
	return nil
}

// rejectUnknownSubcommands makes every command that only groups others (data,
// timemodel) fail on an argument that names none of them, as the root command
// does, instead of printing its help and succeeding; without arguments it
// prints its help.
func rejectUnknownSubcommands(root *cobra.Command) {
	for _, c := range root.Commands() {
		rejectUnknownSubcommands(c)
		if !c.HasSubCommands() || c.Runnable() {
			continue
		}
		if c.SuggestionsMinimumDistance <= 0 {
			c.SuggestionsMinimumDistance = 2 // cobra's own default, applied only at the root
		}
		c.Args = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			var names []string
			for _, s := range cmd.Commands() {
				if s.IsAvailableCommand() {
					names = append(names, s.Name())
				}
			}
			msg := fmt.Sprintf("unknown command %q for %q (its commands: %s)", args[0], cmd.CommandPath(), strings.Join(names, ", "))
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				msg += fmt.Sprintf("; did you mean %q?", s[0])
			}
			return errors.New(msg)
		}
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	}
}

// noArgs refuses positional arguments to a command whose inputs are all flags,
// showing its usage line, which says where the argument belongs (a config file
// is --config FILE, a run directory --run DIR).
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	name := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ") // main prefixes "gradwire: "
	return fmt.Errorf("%s takes no arguments (got %q); usage: %s", name, strings.Join(args, " "), cmd.UseLine())
}

// folderFlag refuses a flag's path that exists and is not a folder; a missing
// one is fine (it is created).
func folderFlag(flag, path string) error {
	if st, err := os.Stat(path); err == nil && !st.IsDir() {
		return fmt.Errorf("%s %s is a file: expected a folder (or a path to create one at)", flag, path)
	}
	return nil
}

// listOnce refuses a list flag that names a value twice (each value makes rows
// of a table, so a repeat would only repeat them).
func listOnce[T comparable](flag string, values []T) error {
	seen := make(map[T]bool, len(values))
	for _, v := range values {
		if seen[v] {
			return fmt.Errorf("%s %v: given twice, expected each value once", flag, v)
		}
		seen[v] = true
	}
	return nil
}
