package sweep

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// flattenJSON turns a decoded summary.json (decoded with UseNumber, so numbers
// keep the exact text the file holds) into dotted column names and their CSV
// text:
//
//   - an object's fields are joined with dots: compression_ratio_by_kind.conv;
//   - a list of objects that all carry a number "gbps" (the time model's
//     predictions) is keyed by that bandwidth, the gbps field itself dropped:
//     time_model.predictions.1gbps.speedup;
//   - any other list is keyed by position: key.0, key.1, ...;
//   - null is the empty string, numbers are their JSON text, booleans true/false.
func flattenJSON(v any) map[string]string {
	out := map[string]string{}
	var walk func(prefix string, v any)
	join := func(prefix, k string) string {
		if prefix == "" {
			return k
		}
		return prefix + "." + k
	}
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				walk(join(prefix, k), e)
			}
		case []any:
			if keys, ok := gbpsKeys(x); ok {
				for i, e := range x {
					m := e.(map[string]any)
					for k, f := range m {
						if k != "gbps" {
							walk(join(join(prefix, keys[i]), k), f)
						}
					}
				}
				return
			}
			for i, e := range x {
				walk(join(prefix, strconv.Itoa(i)), e)
			}
		case nil:
			out[prefix] = ""
		case json.Number:
			out[prefix] = x.String()
		case string:
			out[prefix] = x
		case bool:
			out[prefix] = strconv.FormatBool(x)
		default:
			out[prefix] = fmt.Sprint(x)
		}
	}
	walk("", v)
	return out
}

// gbpsKeys returns "<gbps>gbps" for every element when the list is one of
// objects with distinct numeric gbps fields.
func gbpsKeys(list []any) ([]string, bool) {
	keys := make([]string, len(list))
	seen := map[string]bool{}
	for i, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, false
		}
		n, ok := m["gbps"].(json.Number)
		if !ok {
			return nil, false
		}
		keys[i] = n.String() + "gbps"
		if seen[keys[i]] {
			return nil, false
		}
		seen[keys[i]] = true
	}
	return keys, len(list) > 0
}

// sortColumns orders flattened column names: segment by segment along the dots,
// a segment that starts with a number (1gbps, 10gbps, 100gbps; list positions)
// compared by that number, others as strings. The order depends only on the set
// of names, so two reports of the same runs have the same columns.
func sortColumns(cols []string) {
	slices.SortFunc(cols, func(a, b string) int {
		as, bs := strings.Split(a, "."), strings.Split(b, ".")
		for i := 0; i < len(as) && i < len(bs); i++ {
			if c := compareSegment(as[i], bs[i]); c != 0 {
				return c
			}
		}
		return len(as) - len(bs)
	})
}

func compareSegment(a, b string) int {
	na, ra, oka := leadingNumber(a)
	nb, rb, okb := leadingNumber(b)
	switch {
	case oka && okb:
		if na != nb {
			if na < nb {
				return -1
			}
			return 1
		}
		return strings.Compare(ra, rb)
	case oka:
		return -1
	case okb:
		return 1
	}
	return strings.Compare(a, b)
}

// leadingNumber splits "10gbps" into 10 and "gbps".
func leadingNumber(s string) (float64, string, bool) {
	end := 0
	for end < len(s) && (s[end] >= '0' && s[end] <= '9' || s[end] == '.') {
		end++
	}
	if end == 0 {
		return 0, s, false
	}
	n, err := strconv.ParseFloat(s[:end], 64)
	if err != nil {
		return 0, s, false
	}
	return n, s[end:], true
}
