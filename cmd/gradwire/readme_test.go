package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/gradwire/gradwire/compress"
	"github.com/gradwire/gradwire/configs"
	"github.com/gradwire/gradwire/optim"
)

// readme is the repository's README, read from this package's folder.
func readme(t *testing.T) (text, root string) {
	t.Helper()
	root = filepath.Join("..", "..")
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw), root
}

// TestReadmeLinksAndPathsExist: every relative link and every repository path
// the README quotes (`experiments/...`, `configs/...`) names a file or folder
// that exists, so a renamed file or a results folder that was never committed
// shows up here instead of in a reader's browser.
func TestReadmeLinksAndPathsExist(t *testing.T) {
	text, root := readme(t)
	var targets []string
	for _, m := range regexp.MustCompile(`\]\(([^)\s]+)\)`).FindAllStringSubmatch(text, -1) {
		target, _, _ := strings.Cut(m[1], "#")
		if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		targets = append(targets, target)
	}
	quoted := regexp.MustCompile("`((?:cmd|configs|experiments|models|data|optim|dist|compress|internal|\\.ci)/[^`\\s]*)`")
	for _, m := range quoted.FindAllStringSubmatch(text, -1) {
		if strings.ContainsAny(m[1], "<>*{}$[]?") { // a pattern or placeholder, not a path
			continue
		}
		targets = append(targets, m[1])
	}
	if len(targets) < 50 {
		t.Fatalf("found %d links and paths in README.md; the patterns no longer match it", len(targets))
	}
	for _, target := range targets {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(strings.TrimSuffix(target, "/")))); err != nil {
			t.Errorf("README.md names %s, which does not exist", target)
		}
	}
}

// TestReadmeConfigKeysExist: every dotted config key the README mentions is a
// key of the config (or a section of keys), so renaming a key without the
// README fails here.
func TestReadmeConfigKeysExist(t *testing.T) {
	text, _ := readme(t)
	known := map[string]bool{}
	for _, key := range configs.Keys() {
		known[key] = true
		for i := strings.LastIndex(key, "."); i > 0; i = strings.LastIndex(key[:i], ".") {
			known[key[:i]] = true
		}
	}
	// A run folder's files (train.log) share their look with keys.
	files := []string{"log", "bin", "json", "jsonl", "yaml", "csv", "md", "png", "svg", "ckpt", "txt"}
	pattern := regexp.MustCompile(`(?:^|[^A-Za-z0-9_./-])((?:data|model|optim|schedule|train|dist|compress|network|layer_parallel)(?:\.[a-z][a-z0-9_]*)+)`)
	n := 0
	for _, m := range pattern.FindAllStringSubmatch(text, -1) {
		key := strings.TrimSuffix(m[1], ".")
		if slices.Contains(files, key[strings.LastIndex(key, ".")+1:]) {
			continue
		}
		n++
		if !known[key] {
			t.Errorf("README.md mentions config key %s, which is not a key (see configs.Keys)", key)
		}
	}
	if n < 100 {
		t.Fatalf("found %d config keys in README.md; the pattern no longer matches it", n)
	}
}

// TestReadmeConfigTable: the Config reference table has a row for every
// config key, and the defaults it gives are the code's (configs.Default), so
// a changed default or a new key cannot leave the table behind. A row gives
// one default per key ("`optim.momentum`, `optim.nesterov` | 0.9, false"),
// or one for all of them; a key written from its dot ("`.factor_masking`")
// is in the first key's section; "X = words" gives X; a default in words
// alone ("config file name") is not checked.
func TestReadmeConfigTable(t *testing.T) {
	text, _ := readme(t)
	start := strings.Index(text, "\n| key | default | meaning |\n")
	if start < 0 {
		t.Fatal("README.md: no config reference table (| key | default | meaning |)")
	}
	table := text[start+1:]
	if end := strings.Index(table, "\n\n"); end >= 0 {
		table = table[:end]
	}
	want := configs.Flat(configs.Default())
	seen := map[string]bool{}
	for _, row := range strings.Split(table, "\n")[2:] {
		cells := strings.Split(row, " | ")
		if len(cells) < 3 {
			t.Fatalf("README.md config table: row %q has no key and default cells", row)
		}
		var keys []string
		for _, k := range strings.Split(strings.TrimPrefix(cells[0], "| "), ", ") {
			k = strings.Trim(k, "`")
			if strings.HasPrefix(k, ".") && len(keys) > 0 {
				k = keys[0][:strings.LastIndex(keys[0], ".")] + k
			}
			keys = append(keys, k)
		}
		defaults := splitOutsideBrackets(cells[1])
		if len(defaults) == 1 {
			for len(defaults) < len(keys) {
				defaults = append(defaults, defaults[0])
			}
		}
		if len(defaults) != len(keys) {
			t.Errorf("README.md config table: %d keys %v but %d defaults %q", len(keys), keys, len(defaults), cells[1])
			continue
		}
		for i, key := range keys {
			code, ok := want[key]
			if !ok {
				t.Errorf("README.md config table: %s is not a config key", key)
				continue
			}
			seen[key] = true
			doc := strings.TrimSpace(defaults[i])
			if j := strings.Index(doc, " = "); j > 0 {
				doc = doc[:j]
			}
			if doc == "config file name" {
				continue
			}
			if !sameDefault(strings.Trim(doc, "`"), code) {
				t.Errorf("README.md config table: %s defaults to %q, the code's default is %q", key, doc, code)
			}
		}
	}
	for _, key := range configs.Keys() {
		if !seen[key] {
			t.Errorf("README.md config table: no row for config key %s", key)
		}
	}
}

// TestReadmeNamesMatchRegistries: the names the config table gives for
// compress.name, optim.name and schedule.name are the registered ones, so a
// compressor, optimizer or schedule added or removed shows up here.
func TestReadmeNamesMatchRegistries(t *testing.T) {
	text, _ := readme(t)
	for key, names := range map[string][]string{
		"compress.name": compress.Names(),
		"optim.name":    optim.Names(),
		"schedule.name": optim.ScheduleNames(),
	} {
		row := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(key) + "` \\| [^|]* \\| ([^|(]*)").FindStringSubmatch(text)
		if row == nil {
			t.Errorf("README.md config table: no row for %s", key)
			continue
		}
		var doc []string
		for _, m := range regexp.MustCompile("`([a-z0-9_-]+)`").FindAllStringSubmatch(row[1], -1) {
			doc = append(doc, m[1])
		}
		slices.Sort(doc)
		if !slices.Equal(doc, names) {
			t.Errorf("README.md config table: %s lists %v, the registered names are %v", key, doc, names)
		}
	}
}

// splitOutsideBrackets splits a table cell at ", " outside [...].
func splitOutsideBrackets(cell string) []string {
	var out []string
	depth, from := 0, 0
	for i := 0; i < len(cell); i++ {
		switch {
		case cell[i] == '[':
			depth++
		case cell[i] == ']':
			depth--
		case depth == 0 && strings.HasPrefix(cell[i:], ", "):
			out = append(out, cell[from:i])
			from = i + 2
		}
	}
	return append(out, cell[from:])
}

// sameDefault compares a README default with configs.Flat's value: numbers
// as numbers (5e-4 and 0.0005), lists without their commas, "" as empty.
func sameDefault(doc, code string) bool {
	if doc == `""` {
		doc = ""
	}
	if strings.HasPrefix(doc, "[") {
		doc = strings.ReplaceAll(doc, ",", "")
	}
	a, errA := strconv.ParseFloat(doc, 64)
	b, errB := strconv.ParseFloat(code, 64)
	if errA == nil && errB == nil {
		return a == b
	}
	return doc == code
}

// TestReadmeFlagsExist: every flag the README gives a gradwire command
// ("gradwire sweep --config F --only P") is a flag of that command.
func TestReadmeFlagsExist(t *testing.T) {
	text, _ := readme(t)
	root := newRootCmd()
	// A command line runs to the end of its line, its backtick, or the next
	// command of a chain.
	line := regexp.MustCompile("gradwire ([a-z][^`\n|;&]*)")
	word := regexp.MustCompile(`^[a-z]+$`) // a command's name, not an argument
	n := 0
	for _, m := range line.FindAllStringSubmatch(text, -1) {
		words := strings.Fields(m[1])
		path := 0
		for path < len(words) && word.MatchString(words[path]) {
			path++
		}
		cmd, _, err := root.Find(words[:path])
		if err != nil || cmd == root {
			continue // prose ("gradwire trains ..."), not a command line
		}
		for _, w := range words[path:] {
			w = strings.Trim(w, "[](),.")
			name, ok := strings.CutPrefix(w, "--")
			if !ok || name == "" || name == "help" {
				continue
			}
			name, _, _ = strings.Cut(name, "=")
			n++
			if cmd.Flags().Lookup(name) == nil && cmd.InheritedFlags().Lookup(name) == nil {
				t.Errorf("README.md gives %q the flag --%s, which it does not have (in %q)", cmd.CommandPath(), name, strings.TrimSpace(m[0]))
			}
		}
	}
	if n < 30 {
		t.Fatalf("found %d flags on gradwire command lines in README.md; the pattern no longer matches it", n)
	}
}

// TestReadmeUsageListsEveryCommand: the usage block after "Every command has a
// `--help`." gives a line to every command that runs (not the groups, help or
// completion), so a new command is listed where users look first.
func TestReadmeUsageListsEveryCommand(t *testing.T) {
	text, _ := readme(t)
	_, after, ok := strings.Cut(text, "Every command has a `--help`.")
	if !ok {
		t.Fatal("README.md has no \"Every command has a `--help`.\" before its usage block")
	}
	_, block, ok := strings.Cut(after, "```\n")
	block, _, ok2 := strings.Cut(block, "```")
	block = "\n" + block
	if !ok || !ok2 {
		t.Fatal("no ``` usage block after \"Every command has a `--help`.\"")
	}
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Name() == "help" || sub.Name() == "completion" || !sub.IsAvailableCommand() {
				continue
			}
			if !sub.HasSubCommands() {
				n++
				if !strings.Contains(block, "\n"+sub.CommandPath()+" ") && !strings.Contains(block, "\n"+sub.CommandPath()+"\n") {
					t.Errorf("README.md's usage block has no line for %q", sub.CommandPath())
				}
			}
			walk(sub)
		}
	}
	walk(newRootCmd())
	if n < 10 {
		t.Fatalf("found %d commands; the walk no longer sees them", n)
	}
}

// TestReadmeListsEverySweep: README's table of sweeps names every sweep file
// in experiments/, so a new sweep is described where users look for one.
func TestReadmeListsEverySweep(t *testing.T) {
	text, root := readme(t)
	start := strings.Index(text, "| sweep | what it compares |")
	if start < 0 {
		t.Fatal(`README.md has no table headed "| sweep | what it compares |"`)
	}
	table := text[start:]
	if end := strings.Index(table, "\n\n"); end >= 0 {
		table = table[:end]
	}
	files, err := filepath.Glob(filepath.Join(root, "experiments", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no sweep files in experiments/: %v", err)
	}
	for _, f := range files {
		name := "`experiments/" + filepath.Base(f) + "`"
		if !strings.Contains(table, name) {
			t.Errorf("README.md's table of sweeps does not name %s", name)
		}
	}
}
