// Package problem is the one error type every config section reports: a dotted
// key, the value found and what is expected. models, optim and compress check
// their own sections with it; configs adds where each value came from.
package problem

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Problem is one invalid setting.
type Problem struct {
	Key   string // full dotted config key, e.g. "optim.lr"
	Value any    // the value found
	Want  string // what is expected, e.g. "must be a positive number"
}

// Error returns "key: value: want", e.g. `optim.name: "sgx": must be one of adam, sgd`.
func (p Problem) Error() string { return p.Key + ": " + Show(p.Value) + ": " + p.Want }

// List collects problems; each method checks one kind of rule and appends a
// Problem when the rule fails.
type List []Problem

// Need records a problem unless ok.
func (l *List) Need(ok bool, key string, value any, want string) {
	if !ok {
		*l = append(*l, Problem{key, value, want})
	}
}

// Add appends problems found elsewhere (another section's checks).
func (l *List) Add(ps ...Problem) { *l = append(*l, ps...) }

// Has reports whether a problem with key was recorded.
func (l List) Has(key string) bool {
	return slices.ContainsFunc(l, func(p Problem) bool { return p.Key == key })
}

func (l *List) AtLeast(key string, v, lo int) {
	l.Need(v >= lo, key, v, fmt.Sprintf("must be at least %d", lo))
}

// Within checks lo <= v <= hi, reporting the bound that is broken.
func (l *List) Within(key string, v, lo, hi int) {
	l.AtLeast(key, v, lo)
	l.Need(v <= hi, key, v, fmt.Sprintf("must be at most %d", hi))
}

func (l *List) OneOf(key, v string, names []string) {
	l.Need(slices.Contains(names, v), key, v, "must be one of "+strings.Join(names, ", "))
}

// The float checks are written so that NaN fails them, and they reject infinities.

func (l *List) Positive(key string, x float64) {
	l.Need(Finite(x) && x > 0, key, x, "must be a positive number")
}

func (l *List) NonNegative(key string, x float64) {
	l.Need(Finite(x) && x >= 0, key, x, "must be a non-negative number")
}

// Unit checks x in [0, 1), the range of a decay factor that must forget.
func (l *List) Unit(key string, x float64) {
	l.Need(x >= 0 && x < 1, key, x, "must be in [0, 1)")
}

// Fraction checks x in (0, 1], the range of a multiplier that may keep everything.
func (l *List) Fraction(key string, x float64) {
	l.Need(x > 0 && x <= 1, key, x, "must be in (0, 1]")
}

// Finite reports whether x is neither NaN nor infinite.
func Finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// Show formats a value for an error message: strings quoted, lists as [a, b], a
// YAML null as null.
func Show(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(x)
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice {
		// A long list is cut: an error message quoting 20,000 sizes hides
		// what it says.
		const shown = 8
		parts := make([]string, min(rv.Len(), shown))
		for i := range parts {
			parts[i] = Show(rv.Index(i).Interface())
		}
		if rv.Len() > shown {
			parts = append(parts, fmt.Sprintf("... (%d values)", rv.Len()))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return fmt.Sprint(v)
}

// Join returns the problems as one error, one per line, or nil if there are none.
// Each is wrapped as a *Problem, which errors.As finds.
func Join(ps []Problem) error {
	errs := make([]error, len(ps))
	for i := range ps {
		errs[i] = &ps[i]
	}
	return errors.Join(errs...)
}
