// Package sweep runs a grid of training runs described by a sweep file (a base
// run config plus named variations of --set overrides, over seeds) and builds
// the sweep's report: runs.csv, table.md and PNG plots, from the runs' output
// files alone.
package sweep

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/gradwire/gradwire/configs"
)

// Spec is a sweep file as written:
//
//	name: compression-lenet5-fashion   # results folder; default: the file's base name
//	base: ../configs/lenet5-fashion.yaml # relative to the sweep file's folder
//	set: [dist.workers=8]              # applied to every run
//	seeds: [1, 2]                      # default [1]
//	variations:
//	  - name: dense
//	    set: [compress.name=none]
//	  - name: dgc
//	    set: [compress.name=dgc]
//	    seeds: [1, 2, 3]                 # overrides the sweep's seeds
//	reuse: [results/lrprobe]           # other sweeps' results folders, relative to the sweep file's folder
//
// A run not yet started whose config equals that of a finished run in one of
// the reuse folders is copied from there instead of trained (see Execute).
type Spec struct {
	Name       string      `yaml:"name"`
	Base       string      `yaml:"base"`
	Set        []string    `yaml:"set"`
	Seeds      []int64     `yaml:"seeds"`
	Variations []Variation `yaml:"variations"`
	Reuse      []string    `yaml:"reuse"`
}

// Variation is one named cell of the grid.
type Variation struct {
	Name  string   `yaml:"name"`
	Set   []string `yaml:"set"`
	Seeds []int64  `yaml:"seeds"`
}

// The keys a sweep file may hold; anything else is a typo and an error.
var (
	specKeys      = []string{"name", "base", "set", "seeds", "variations", "reuse"}
	variationKeys = []string{"name", "set", "seeds"}
)

// Sweep is a loaded sweep file: every variation has its seeds, the base config
// path is resolved, and every run's config has been loaded and validated.
type Sweep struct {
	Path     string // the sweep file, as given
	Name     string
	BasePath string // the base run config, resolved against the sweep file's folder
	Set      []string
	// Variations in file order, each with its seeds filled in.
	Variations []Variation
	// Reuse are other sweeps' results folders, resolved against the sweep
	// file's folder, whose finished runs stand in for this sweep's runs of
	// the same config.
	Reuse []string
	Runs  []Run // variation order, then the variation's seed order
}

// Run is one (variation, seed) training run.
type Run struct {
	Index     int // 1-based position in the sweep
	Variation string
	Seed      int64
	// Sets are the overrides applied to the base config, in order: the sweep's
	// set, the variation's set, then seed and train.progress.
	Sets   []string
	Config configs.Config
}

// Dir is the run's directory under the sweep's results folder.
func (r Run) Dir(sweepDir string) string {
	return filepath.Join(sweepDir, "runs", r.Variation, "seed-"+strconv.FormatInt(r.Seed, 10))
}

// Dir is the sweep's results folder under the results root.
func (s *Sweep) Dir(results string) string { return filepath.Join(results, s.Name) }

// safeName is what sweep and variation names may contain: they become folder names.
var safeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// Load reads and validates the sweep file at path. Every problem is reported at
// once, each naming the file and, where it applies, the line, variation and key.
// The config of every run is loaded and validated, so that a sweep never stops
// half-way on a typo in its last variation.
func Load(path string) (*Sweep, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sweep file: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: empty sweep file: expected the keys %s", path, strings.Join(specKeys, ", "))
	}
	root := doc.Content[0]
	if errs := checkKeys(path, root); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var spec Spec
	if err := root.Decode(&spec); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return resolve(path, spec)
}

// checkKeys reports keys of the sweep file that are not part of the format.
// yaml.v3 can reject unknown fields too, but its errors name a Go type rather
// than the variation the key sits in.
func checkKeys(path string, root *yaml.Node) []error {
	if root.Kind != yaml.MappingNode {
		return []error{fmt.Errorf("%s:%d: expected a mapping with the keys %s", path, root.Line, strings.Join(specKeys, ", "))}
	}
	var errs []error
	unknown := func(n *yaml.Node, where string, known []string) {
		errs = append(errs, fmt.Errorf("%s:%d: %sunknown key %q (valid keys: %s)", path, n.Line, where, n.Value, strings.Join(known, ", ")))
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if !slices.Contains(specKeys, k.Value) {
			unknown(k, "", specKeys)
			continue
		}
		if k.Value != "variations" || v.Kind != yaml.SequenceNode {
			continue // type errors are the decoder's
		}
		for j, item := range v.Content {
			if item.Kind != yaml.MappingNode {
				continue
			}
			where := fmt.Sprintf("variations[%d]: ", j)
			for m := 0; m+1 < len(item.Content); m += 2 {
				if item.Content[m].Value == "name" {
					where = fmt.Sprintf("variation %q: ", item.Content[m+1].Value)
				}
			}
			for m := 0; m+1 < len(item.Content); m += 2 {
				if key := item.Content[m]; !slices.Contains(variationKeys, key.Value) {
					unknown(key, where, variationKeys)
				}
			}
		}
	}
	return errs
}

// resolve fills in the defaults, checks names and seeds, and loads every run's
// config.
func resolve(path string, spec Spec) (*Sweep, error) {
	s := &Sweep{Path: path, Name: spec.Name, Set: spec.Set}
	if s.Name == "" {
		s.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{path}, args...)...))
	}
	if !safeName.MatchString(s.Name) {
		fail("name: %q: expected a letter or digit, then letters, digits, '.', '_' or '-' (it names the results folder)", s.Name)
	}
	if spec.Base == "" {
		fail("base: missing: name the run config the variations modify, relative to this file's folder, e.g. base: ../configs/lenet5-fashion.yaml")
	} else {
		// Relative to the sweep file, so that a sweep and its base config can be
		// moved together and the sweep runs from any working directory.
		s.BasePath = spec.Base
		if !filepath.IsAbs(spec.Base) {
			s.BasePath = filepath.Join(filepath.Dir(path), spec.Base)
		}
	}
	for _, r := range spec.Reuse {
		dir := r
		if dir != "" && !filepath.IsAbs(dir) {
			dir = filepath.Join(filepath.Dir(path), dir)
		}
		if fi, err := os.Stat(dir); r == "" || err != nil || !fi.IsDir() {
			fail("reuse: %q (%s): not a folder: expected another sweep's results folder, relative to this file's folder, e.g. reuse: [results/<sweep name>]", r, dir)
			continue
		}
		s.Reuse = append(s.Reuse, dir)
	}
	seeds := spec.Seeds
	if len(seeds) == 0 {
		seeds = []int64{1}
	}
	if err := checkSeeds(seeds); err != nil {
		fail("seeds: %v", err)
	}
	for _, kv := range spec.Set {
		if setsSeed(kv) {
			fail("set: %q: the seed comes from seeds, not from set", kv)
		}
	}
	for _, r := range configs.RepeatedSets(spec.Set) {
		fail("set: %s: give each key once", r)
	}
	if len(spec.Variations) == 0 {
		fail("variations: missing: list at least one variation (name, set, seeds)")
	}
	seen := map[string]bool{}
	for i, v := range spec.Variations {
		switch {
		case v.Name == "":
			fail("variations[%d]: name: missing", i)
		case !safeName.MatchString(v.Name):
			fail("variation %q: name: expected a letter or digit, then letters, digits, '.', '_' or '-' (it names the run folder)", v.Name)
		case seen[v.Name]:
			fail("variation %q: name: appears more than once; variation names must be unique", v.Name)
		}
		seen[v.Name] = true
		if len(v.Seeds) == 0 {
			v.Seeds = seeds
		} else if err := checkSeeds(v.Seeds); err != nil {
			fail("variation %q: seeds: %v", v.Name, err)
		}
		for _, kv := range v.Set {
			if setsSeed(kv) {
				fail("variation %q: set: %q: the seed comes from seeds, not from set", v.Name, kv)
			}
		}
		for _, r := range configs.RepeatedSets(v.Set) {
			fail("variation %q: set: %s: give each key once", v.Name, r)
		}
		s.Variations = append(s.Variations, v)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	// The base and the common overrides alone: a problem there would otherwise
	// be reported once per variation.
	if _, err := configs.Load(s.BasePath, s.Set); err != nil {
		return nil, prefixLines(fmt.Sprintf("%s: base %s with set: ", path, s.BasePath), err)
	}
	for _, v := range s.Variations {
		// Every seed is loaded (the seed is part of the config), but one mistake
		// is reported once per variation with the seeds it affects.
		bad := map[string][]string{}
		var order []string
		for _, seed := range v.Seeds {
			sets := runSets(s.Set, v.Set, seed)
			cfg, err := configs.Load(s.BasePath, sets)
			if err != nil {
				msg := err.Error()
				if bad[msg] == nil {
					order = append(order, msg)
				}
				bad[msg] = append(bad[msg], strconv.FormatInt(seed, 10))
				continue
			}
			s.Runs = append(s.Runs, Run{Index: len(s.Runs) + 1, Variation: v.Name, Seed: seed, Sets: sets, Config: cfg})
		}
		for _, msg := range order {
			label := "seed"
			if len(bad[msg]) > 1 {
				label = "seeds"
			}
			errs = append(errs, prefixLines(fmt.Sprintf("%s: variation %q (%s %s): ", path, v.Name, label, strings.Join(bad[msg], ", ")), errors.New(msg)))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

// runSets is the override list of one run. train.progress is off because the
// sweep prints one line per run instead of a progress bar. A key given again
// (a variation's set overriding the common one) keeps only its last value, as
// loading the list would, so that the train command printed for the run gives
// each key once (train warns of a key given again).
func runSets(common, variation []string, seed int64) []string {
	all := slices.Concat(common, variation, []string{"seed=" + strconv.FormatInt(seed, 10), "train.progress=false"})
	last := map[string]int{}
	for i, kv := range all {
		if k, _, ok := configs.SplitSet(kv); ok {
			last[k] = i
		}
	}
	sets := make([]string, 0, len(all))
	for i, kv := range all {
		if k, _, ok := configs.SplitSet(kv); !ok || last[k] == i {
			sets = append(sets, kv) // malformed entries stay, for Load to report
		}
	}
	return sets
}

func setsSeed(kv string) bool {
	key, _, _ := configs.SplitSet(kv)
	return key == "seed"
}

func checkSeeds(seeds []int64) error {
	seen := map[int64]bool{}
	for _, s := range seeds {
		if seen[s] {
			return fmt.Errorf("%d appears more than once", s)
		}
		seen[s] = true
	}
	return nil
}

// prefixLines puts prefix before every line of err (configs.Load joins one
// error per problem).
func prefixLines(prefix string, err error) error {
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		lines[i] = prefix + strings.TrimPrefix(l, "--set: ")
	}
	return errors.New(strings.Join(lines, "\n"))
}

// Record is sweep.yaml, written to the results folder when sweeping: the sweep
// file in its resolved form (base path resolved, every variation's seeds
// explicit). The report reads it for the order of the variations and the runs
// it expects.
type Record struct {
	Name       string            `yaml:"name"`
	Source     string            `yaml:"source"` // the sweep file the runs came from
	Base       string            `yaml:"base"`   // the base run config, relative to the working directory of the sweep
	Set        []string          `yaml:"set"`
	Variations []RecordVariation `yaml:"variations"`
	Reuse      []string          `yaml:"reuse,omitempty"` // relative to the working directory of the sweep
}

// RecordVariation is one variation of sweep.yaml.
type RecordVariation struct {
	Name  string   `yaml:"name"`
	Seeds []int64  `yaml:"seeds,flow"`
	Set   []string `yaml:"set"`
}

// Record returns the resolved form of the sweep.
func (s *Sweep) Record() Record {
	r := Record{Name: s.Name, Source: filepath.ToSlash(s.Path), Base: filepath.ToSlash(s.BasePath), Set: s.Set}
	for _, dir := range s.Reuse {
		r.Reuse = append(r.Reuse, filepath.ToSlash(dir))
	}
	if r.Set == nil {
		r.Set = []string{}
	}
	for _, v := range s.Variations {
		set := v.Set
		if set == nil {
			set = []string{}
		}
		r.Variations = append(r.Variations, RecordVariation{Name: v.Name, Seeds: v.Seeds, Set: set})
	}
	return r
}

// marshalYAML encodes v with the two-space indent of the shipped files.
func marshalYAML(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// readRecord loads sweep.yaml; a missing file is (nil, nil).
func readRecord(path string) (*Record, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r Record
	if err := yaml.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}
