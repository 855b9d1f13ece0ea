package configs

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// field is one leaf of Config: its dotted key and where the value sits in the struct.
type field struct {
	key   string
	index []int // reflect field index path from Config
	typ   reflect.Type
}

// fields lists every leaf of Config in struct order, keyed by the mapstructure tags, so
// defaults, --set, unknown-key checks and Keys follow the struct with no list to keep.
var fields = leaves(reflect.TypeFor[Config](), "", nil)

// fieldByKey indexes fields by dotted key; sections holds every dotted key prefix
// ("optim", "data", ...) that names a struct rather than a value.
var fieldByKey, sections = func() (map[string]field, map[string]bool) {
	byKey, secs := map[string]field{}, map[string]bool{}
	for _, f := range fields {
		byKey[f.key] = f
		for i := strings.LastIndex(f.key, "."); i > 0; i = strings.LastIndex(f.key[:i], ".") {
			secs[f.key[:i]] = true
		}
	}
	return byKey, secs
}()

// leaves walks the struct type t. A field without a mapstructure tag, or of a type the
// loader cannot parse, is a programming error caught when the package initialises.
func leaves(t reflect.Type, prefix string, index []int) []field {
	var out []field
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("mapstructure")
		if tag == "" {
			panic(fmt.Sprintf("configs: %s.%s has no mapstructure tag", t.Name(), sf.Name))
		}
		key, idx := prefix+tag, append(slices.Clone(index), i)
		switch {
		case sf.Type.Kind() == reflect.Struct:
			out = append(out, leaves(sf.Type, key+".", idx)...)
		case expected(sf.Type) == "":
			panic(fmt.Sprintf("configs: %s has unsupported type %s", key, sf.Type))
		default:
			out = append(out, field{key: key, index: idx, typ: sf.Type})
		}
	}
	return out
}

// Keys returns every dotted config key ("data.batch_size", "optim.lr", ...), sorted.
func Keys() []string {
	keys := make([]string, len(fields))
	for i, f := range fields {
		keys[i] = f.key
	}
	slices.Sort(keys)
	return keys
}

// unknownKeyError describes a key that is not in Config: the nearest known key when one
// is close, and the valid keys of the deepest section of key that exists.
func unknownKeyError(key string) error {
	if sections[key] { // --set optim=0.1
		return fmt.Errorf("%q is a section, not a key: set one of its keys, %s.<key> (%s keys: %s)", key, key, key, strings.Join(children(key), ", "))
	}
	msg := fmt.Sprintf("unknown key %q", key)
	if near := nearest(key); near != "" {
		msg += fmt.Sprintf("; did you mean %q?", near)
	}
	sec := parent(key)
	for sec != "" && !sections[sec] {
		sec = parent(sec)
	}
	if sec == "" {
		return fmt.Errorf("%s (valid keys: %s)", msg, strings.Join(children(""), ", "))
	}
	return fmt.Errorf("%s (valid %s keys: %s)", msg, sec, strings.Join(children(sec), ", "))
}

// parent returns the section part of a dotted key, "" at the top level.
func parent(key string) string {
	i := strings.LastIndex(key, ".")
	if i < 0 {
		return ""
	}
	return key[:i]
}

// children returns the sorted names directly under section sec ("" for the top level).
func children(sec string) []string {
	prefix := sec + "."
	if sec == "" {
		prefix = ""
	}
	var names []string
	for _, f := range fields {
		if rest, ok := strings.CutPrefix(f.key, prefix); ok {
			name, _, _ := strings.Cut(rest, ".")
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// nearest returns the known key closest to an unknown one, or "" when none is close.
// Names are compared by edit distance, with an abbreviation (lr for learning_rate)
// counting as exact and a different section costing one more edit, so that
// train.batch_size finds data.batch_size.
func nearest(key string) string {
	sec, name := parent(key), key[strings.LastIndex(key, ".")+1:]
	best, bestDist := "", max(1, len(name)/3)+1
	for _, k := range Keys() {
		kname := k[strings.LastIndex(k, ".")+1:]
		d := editDistance(name, kname)
		if abbreviates(name, kname) || abbreviates(kname, name) {
			d = 0
		}
		if parent(k) != sec {
			d++
		}
		if d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// abbreviates reports whether short is the initials of the snake_case words of long.
func abbreviates(short, long string) bool {
	words := strings.Split(long, "_")
	if len(words) < 2 || len(words) != len(short) {
		return false
	}
	for i, w := range words {
		if w == "" || w[0] != short[i] {
			return false
		}
	}
	return true
}

// editDistance is the Levenshtein distance between a and b (bytes; keys are ASCII).
func editDistance(a, b string) int {
	row := make([]int, len(b)+1)
	for j := range row {
		row[j] = j
	}
	for i := 1; i <= len(a); i++ {
		diag := row[0]
		row[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			diag, row[j] = row[j], min(row[j]+1, row[j-1]+1, diag+cost)
		}
	}
	return row[len(b)]
}

// Flat returns every key of c with its value as text ("data.batch_size" -> "64",
// "model.hidden" -> "[512 256]"), the form in which runs and ranks compare configs.
func Flat(c Config) map[string]string {
	v := reflect.ValueOf(c)
	out := make(map[string]string, len(fields))
	for _, f := range fields {
		out[f.key] = fmt.Sprint(v.FieldByIndex(f.index).Interface())
	}
	return out
}

// outcomeFree lists the keys that change neither the parameters a run computes nor the
// order of its steps: how it is logged, checkpointed, evaluated and run on the
// machine. Every other key changes the maths, so a resumed run must keep it.
var outcomeFree = map[string]bool{
	"name": true, "data.dir": true, "data.eval_batch_size": true,
	"train.log_every": true, "train.progress": true, "train.checkpoint": true,
	"train.checkpoint_every": true, "train.checkpoint_minutes": true, "train.keep_checkpoints": true,
	"train.eval_limit": true, "dist.check_every": true,
	"network.bandwidth_gbps": true, "network.latency_us": true, "network.topology": true,
}

// ChangesOutcome reports whether a different value of key can change the run's
// parameters or its sequence of steps (and so must match on resume).
func ChangesOutcome(key string) bool { return !outcomeFree[key] }
