package configs

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gradwire/gradwire/compress"
	"github.com/gradwire/gradwire/internal/problem"
	"github.com/spf13/viper"
	"gopkg.in/yaml.v3"
)

// Load returns the run config in the YAML file at path, with Default for every key the
// file leaves out, then the --set overrides ("key=value", applied in order), validated.
// An empty path gives the defaults plus the overrides. An empty name becomes the file's
// base name without its extension, or "run".
//
// Every problem found at a stage is reported at once, each naming where it came from
// (the file or --set), the dotted key, the value and what was expected.
func Load(path string, sets []string) (Config, error) {
	v := viper.New()
	def := reflect.ValueOf(Default())
	for _, f := range fields {
		v.SetDefault(f.key, def.FieldByIndex(f.index).Interface())
	}
	var at lines
	if path != "" {
		raw, err := os.ReadFile(path)
		if err != nil {
			return Config{}, err // os errors name the file already
		}
		// Parsed once more for the structure viper does not keep: the
		// document's kind and each key's line (nil when it does not parse:
		// viper's error names the file).
		var doc *yaml.Node
		var parsed yaml.Node
		if yaml.Unmarshal(raw, &parsed) == nil && len(parsed.Content) > 0 {
			doc = parsed.Content[0]
		}
		if err := topLevelMapping(path, doc); err != nil {
			return Config{}, err
		}
		v.SetConfigType("yaml") // whatever the file's extension
		if err := v.ReadConfig(bytes.NewReader(raw)); err != nil {
			if perr, ok := errors.AsType[viper.ConfigParseError](err); ok {
				return Config{}, fmt.Errorf("%s: %w", path, perr.Unwrap())
			}
			return Config{}, fmt.Errorf("%s: %w", path, err)
		}
		at = keyLines(path, doc)
	}

	errs := checkFile(v, at)
	fromSet := map[string]bool{}
	for _, s := range sets {
		key, raw, err := parseSet(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("--set: %w", err))
			continue
		}
		// The raw string goes to viper; the decode hook parses it again in UnmarshalExact.
		v.Set(key, raw)
		fromSet[key] = true
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	// A DGC preset fills in its keys beneath the file's and the --set ones (an
	// unknown name is reported by the validation below).
	for key, val := range compress.DGCPresets[v.GetString("compress.dgc.preset")] {
		if !v.InConfig(key) && !fromSet[key] {
			v.SetDefault(key, val)
		}
	}

	var c Config
	if err := v.UnmarshalExact(&c, viper.DecodeHook(decodeHook)); err != nil {
		return Config{}, fmt.Errorf("decode config: %w", err)
	}
	// Per-optimizer defaults (betas, eps, LARS eta) and per-schedule ones: the
	// resolved config states the values the run uses.
	c.Optim.ApplyDefaults()
	c.Schedule.ApplyDefaults()
	if c.Name == "" {
		c.Name = unsafeRun.ReplaceAllString(strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)), "-")
		if path == "" || !SafeName.MatchString(c.Name) {
			c.Name = "run"
		}
	}

	for _, p := range c.problems() {
		switch {
		case fromSet[p.Key]:
			errs = append(errs, fmt.Errorf("--set: %w", &p))
		case path != "" && v.InConfig(p.Key):
			errs = append(errs, fmt.Errorf("%s: %w%s", at.of(p.Key), &p, setPartners(p, fromSet)))
		default:
			errs = append(errs, fmt.Errorf("%w%s", &p, setPartners(p, fromSet)))
		}
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	return c, nil
}

// setPartners names the --set keys that a rule between keys mentions, for a
// problem reported at another key (the file's, or a default): the value that
// broke the rule may be the --set one, so the message says where it came from.
func setPartners(p problem.Problem, fromSet map[string]bool) string {
	var keys []string
	for key := range fromSet {
		if key != p.Key && mentions(p.Want, key) {
			keys = append(keys, key)
		}
	}
	if len(keys) == 0 {
		return ""
	}
	slices.Sort(keys)
	return " (" + strings.Join(keys, ", ") + " given by --set)"
}

// mentions reports whether text names key as a whole key: "dist.workers" is
// not mentioned by "dist.workers_per_node".
func mentions(text, key string) bool {
	keyChar := func(b byte) bool {
		return b == '.' || b == '_' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
	}
	for i := 0; ; {
		j := strings.Index(text[i:], key)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(key)
		// A full stop after the key ends a sentence, not a longer key.
		after := end == len(text) || !keyChar(text[end]) || text[end] == '.' && (end+1 == len(text) || !keyChar(text[end+1]))
		if (start == 0 || !keyChar(text[start-1])) && after {
			return true
		}
		i = start + 1
	}
}

// unsafeRun matches what a file name may hold but a run name may not.
var unsafeRun = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// lines locates the keys of a config file: "path:LINE" for each dotted key
// (lower case, as viper has them).
type lines struct {
	path string
	line map[string]int
}

// topLevelMapping refuses a file whose document root is not a mapping of config
// sections (a list, or a bare value), which viper would report in its own types.
// A nil root (an empty file, or one viper will refuse) passes.
func topLevelMapping(path string, root *yaml.Node) error {
	if root == nil {
		return nil
	}
	if root.Kind == yaml.MappingNode || root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil
	}
	found := map[yaml.Kind]string{yaml.SequenceNode: "a list", yaml.ScalarNode: "a single value", yaml.AliasNode: "an alias"}[root.Kind]
	return fmt.Errorf("%s:%d: expected a mapping of the config's keys (%s), found %s", path, root.Line, strings.Join(children(""), ", "), found)
}

// keyLines maps every dotted key of the YAML document root doc to the line it is written
// on. Keys brought in by a merge (<<: *anchor) get the anchor's lines, unless the
// mapping writes them itself.
func keyLines(path string, doc *yaml.Node) lines {
	at := lines{path: path, line: map[string]int{}}
	if doc == nil {
		return at // viper parsed it; without lines, errors still name the file
	}
	var walk func(n *yaml.Node, prefix string, own bool)
	walk = func(n *yaml.Node, prefix string, own bool) {
		if n.Kind == yaml.AliasNode {
			n = n.Alias
		}
		if n.Kind != yaml.MappingNode {
			return
		}
		var merged []*yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if k.Tag == "!!merge" {
				merged = append(merged, val)
				continue
			}
			key := prefix + strings.ToLower(k.Value)
			if _, seen := at.line[key]; own || !seen {
				at.line[key] = k.Line
			}
			walk(val, key+".", own)
		}
		for _, m := range merged {
			if m.Kind == yaml.SequenceNode { // <<: [*a, *b]
				for _, item := range m.Content {
					walk(item, prefix, false)
				}
			} else {
				walk(m, prefix, false)
			}
		}
	}
	walk(doc, "", true)
	return at
}

// of returns where key is written: "path:LINE", or the path alone when the line is
// not known.
func (at lines) of(key string) string {
	if n, ok := at.line[key]; ok {
		return fmt.Sprintf("%s:%d", at.path, n)
	}
	return at.path
}

// checkFile reports the file's keys that are not in Config and its values that do not
// parse as their field's type. UnmarshalExact would reject both too, but its errors
// name neither the file nor, reliably, the dotted key.
func checkFile(v *viper.Viper, at lines) []error {
	var errs []error
	keys := v.AllKeys()
	slices.Sort(keys)
	for _, k := range keys {
		switch _, known := fieldByKey[k]; {
		case known || underLeaf(k):
			// Leaves are type-checked below; keys inside a leaf make its value a mapping,
			// which that check reports.
		case sections[k]:
			// A section given a scalar or a list; a null section (`model:`) keeps the
			// defaults and reads back as a mapping.
			if _, isMap := v.Get(k).(map[string]any); !isMap {
				errs = append(errs, fmt.Errorf("%s: %s: %s: expected a mapping of %s keys", at.of(k), k, show(v.Get(k)), k))
			}
		default:
			errs = append(errs, fmt.Errorf("%s: %w", at.of(k), unknownKeyError(k)))
		}
	}
	for _, f := range fields {
		if !v.InConfig(f.key) {
			continue
		}
		if val := v.Get(f.key); !parses(f.typ, val) {
			errs = append(errs, fmt.Errorf("%s: %s: %s: expected %s", at.of(f.key), f.key, show(val), expectedFor(f.typ, val)))
		}
	}
	return errs
}

// underLeaf reports whether some dotted prefix of key is a leaf key.
func underLeaf(key string) bool {
	for p := parent(key); p != ""; p = parent(p) {
		if _, ok := fieldByKey[p]; ok {
			return true
		}
	}
	return false
}

// parseSet splits one --set argument, checking that the key exists and that the value
// parses as the key's type. Keys are matched case-insensitively, as viper matches the
// file's keys.
func parseSet(s string) (key, raw string, err error) {
	key, raw, ok := SplitSet(s)
	if !ok {
		return "", "", fmt.Errorf("%q: expected key=value, e.g. optim.lr=0.1", s)
	}
	f, known := fieldByKey[key]
	if !known {
		return "", "", unknownKeyError(key)
	}
	if !parses(f.typ, raw) {
		return "", "", fmt.Errorf("%s: %q: expected %s", key, raw, expectedFor(f.typ, raw))
	}
	return key, raw, nil
}

// SplitSet splits one key=value override into its key, as Load matches it
// (trimmed, in lower case), and its raw value; ok is false without an "=" or
// with an empty key.
func SplitSet(s string) (key, raw string, ok bool) {
	key, raw, ok = strings.Cut(s, "=")
	key = strings.ToLower(strings.TrimSpace(key))
	return key, raw, ok && key != ""
}

// RepeatedSets describes each key that a list of key=value overrides gives
// more than once (matched as Load matches them), with its values in
// order, e.g. `optim.lr given 2 times ("0.1", "0.2")`: loading the list keeps
// the last value. Malformed entries are left to Load.
func RepeatedSets(sets []string) []string {
	values := map[string][]string{}
	var order []string
	for _, s := range sets {
		key, raw, ok := SplitSet(s)
		if !ok {
			continue
		}
		if values[key] == nil {
			order = append(order, key)
		}
		values[key] = append(values[key], strconv.Quote(raw))
	}
	var out []string
	for _, key := range order {
		if vs := values[key]; len(vs) > 1 {
			out = append(out, fmt.Sprintf("%s given %d times (%s)", key, len(vs), strings.Join(vs, ", ")))
		}
	}
	return out
}

// decodeHook is the mapstructure hook for UnmarshalExact: it turns every leaf value
// (a YAML scalar or list, a --set string, a default) into its field's type and passes
// sections through.
func decodeHook(_, to reflect.Type, data any) (any, error) {
	if expected(to) == "" {
		return data, nil
	}
	out, ok := convert(to, data)
	if !ok {
		return nil, fmt.Errorf("%s: expected %s", show(data), expectedFor(to, data))
	}
	return out, nil
}

// expectedFor is expected(t) for the value v that did not convert, naming the
// range when v is an integer too large for any int64 (a YAML integer beyond it
// arrives as a float, 1e+20, or as a uint64; a --set one as a string).
func expectedFor(t reflect.Type, v any) string {
	if k := t.Kind(); k != reflect.Int && k != reflect.Int64 {
		return expected(t)
	}
	beyond := false
	switch x := v.(type) {
	case uint64:
		beyond = x > math.MaxInt64
	case float64:
		beyond = x == math.Trunc(x) && math.Abs(x) >= math.MaxInt64
	case string:
		_, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		beyond = errors.Is(err, strconv.ErrRange)
	}
	if beyond && strconv.IntSize == 64 {
		return fmt.Sprintf("an integer from %d to %d", int64(math.MinInt64), int64(math.MaxInt64))
	}
	return expected(t)
}

// parses reports whether convert accepts v for type t.
func parses(t reflect.Type, v any) bool {
	_, ok := convert(t, v)
	return ok
}

// expected describes the values a leaf type takes, for error messages; "" for types
// that are not leaves of Config.
func expected(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int:
		if strconv.IntSize == 32 {
			return "an integer from -2147483648 to 2147483647 (a 32-bit build)"
		}
		return "an integer"
	case reflect.Int64:
		return "an integer"
	case reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		switch t.Elem().Kind() {
		case reflect.Int:
			return "a list of integers, e.g. 512,256 or [512, 256]"
		case reflect.Float64:
			return "a list of numbers, e.g. 80,120 or [80, 120]"
		}
	}
	return ""
}

// convert returns v as a value of leaf type t. Strings are parsed, since that is how
// --set values arrive; other values must already be of the right kind, so a YAML 2.5 or
// true for an integer is an error rather than a silent cast.
func convert(t reflect.Type, v any) (any, bool) {
	switch t.Kind() {
	case reflect.String:
		s, ok := v.(string)
		return s, ok
	case reflect.Bool:
		switch x := v.(type) {
		case bool:
			return x, true
		case string:
			b, err := strconv.ParseBool(strings.TrimSpace(x))
			return b, err == nil
		}
	case reflect.Int, reflect.Int64:
		// An int field takes what this build's int holds (on a 32-bit build a
		// larger value would wrap).
		if n, ok := toInt(v); ok && (t.Kind() == reflect.Int64 || n >= math.MinInt && n <= math.MaxInt) {
			return reflect.ValueOf(n).Convert(t).Interface(), true
		}
	case reflect.Float64:
		return toFloat(v)
	case reflect.Slice:
		return toSlice(t, v)
	}
	return nil, false
}

func toInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int64:
		return x, true
	case uint64: // YAML integers beyond int64
		return int64(x), x <= math.MaxInt64
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		return n, err == nil
	}
	return 0, false
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		return f, err == nil
	}
	return 0, false
}

// toSlice converts a list (YAML sequence or default slice), a string "512,256" or
// "[512, 256]", or a lone scalar (a list of one, as "80" is on the command line).
func toSlice(t reflect.Type, v any) (any, bool) {
	var items []any
	if s, ok := v.(string); ok {
		s = strings.TrimSpace(s)
		if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
			s = s[1 : len(s)-1]
		}
		if strings.TrimSpace(s) != "" {
			for _, item := range strings.Split(s, ",") {
				items = append(items, item)
			}
		}
	} else if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice {
		for i := range rv.Len() {
			items = append(items, rv.Index(i).Interface())
		}
	} else {
		items = []any{v}
	}
	out := reflect.MakeSlice(t, len(items), len(items))
	for i, item := range items {
		x, ok := convert(t.Elem(), item)
		if !ok {
			return nil, false
		}
		out.Index(i).Set(reflect.ValueOf(x))
	}
	return out.Interface(), true
}

// show formats a value for an error message: strings quoted, lists as [a, b], a YAML
// null as null, as every problem shows its value.
func show(v any) string { return problem.Show(v) }
