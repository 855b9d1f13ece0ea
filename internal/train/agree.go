package train

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gradwire/gradwire/dist"
)

// Limits of the disagreement message: enough to act on, short enough to read
// when every rank prints it.
const (
	agreeMaxKeys   = 12 // differing keys named
	agreeMaxValues = 4  // values listed per key
)

// agreeAcrossRanks checks that every process of world runs the same job: that
// their fingerprints (key -> value: the resolved config, the build, the data's
// digest) are equal. Every process calls it at start-up, before any other
// collective of the run, since a collective entered with other sizes or in
// another order corrupts memory or waits forever. When they differ, every
// process returns the same error, naming each differing key and which ranks
// hold which value.
//
// The first round gathers a SHA-256 digest, of the same size everywhere; only
// when the digests differ does a second round gather the full fingerprints.
// Both rounds are all-gathers, which take payloads of any length, so no
// process can wait on a size another one did not send.
func agreeAcrossRanks(world dist.Collective, fp map[string]string) error {
	enc, err := json.Marshal(fp) // sorted keys: a canonical encoding
	if err != nil {
		return fmt.Errorf("run fingerprint: %w", err)
	}
	sum := sha256.Sum256(enc)
	digests, err := world.AllGather(sum[:])
	if err != nil {
		return fmt.Errorf("comparing the ranks' runs: %w", err)
	}
	same := true
	for _, d := range digests {
		same = same && bytes.Equal(d, digests[0])
	}
	if same {
		return nil
	}
	all, err := world.AllGather(enc)
	if err != nil {
		return fmt.Errorf("comparing the ranks' runs: %w", err)
	}
	fps := make([]map[string]string, len(all))
	for r, b := range all {
		if err := json.Unmarshal(b, &fps[r]); err != nil {
			return fmt.Errorf("ranks disagree on the run: rank %d sent an unreadable description of its run (%d bytes: %v); "+
				"is it the same gradwire build?", r, len(b), err)
		}
	}
	return disagreement(fps)
}

// disagreement describes how the ranks' fingerprints differ, or returns nil
// when they do not.
func disagreement(fps []map[string]string) error {
	keys := map[string]bool{}
	for _, fp := range fps {
		for k := range fp {
			keys[k] = true
		}
	}
	var diffs []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if d := describeKey(k, fps); d != "" {
			diffs = append(diffs, d)
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	more := ""
	if len(diffs) > agreeMaxKeys {
		more = fmt.Sprintf("; and %d more keys", len(diffs)-agreeMaxKeys)
		diffs = diffs[:agreeMaxKeys]
	}
	return fmt.Errorf("ranks disagree on the run (every rank needs the same config, data and gradwire build): %s%s",
		strings.Join(diffs, "; "), more)
}

// describeKey lists key's values with the ranks holding each, in order of
// the first rank, e.g. "model.name: lenet5 on ranks 0-2, mlp on rank 3"; ""
// when every rank holds the same value.
func describeKey(key string, fps []map[string]string) string {
	type group struct {
		value string
		set   bool
		ranks []int
	}
	var groups []*group
	for r, fp := range fps {
		v, set := fp[key]
		i := slices.IndexFunc(groups, func(g *group) bool { return g.value == v && g.set == set })
		if i < 0 {
			groups = append(groups, &group{value: v, set: set})
			i = len(groups) - 1
		}
		groups[i].ranks = append(groups[i].ranks, r)
	}
	if len(groups) == 1 {
		return ""
	}
	parts := make([]string, 0, min(len(groups), agreeMaxValues+1))
	for i, g := range groups {
		if i == agreeMaxValues {
			parts = append(parts, fmt.Sprintf("%d more values", len(groups)-i))
			break
		}
		v := "(not set)"
		if g.set {
			v = showValue(g.value)
		}
		parts = append(parts, v+" on "+rankList(g.ranks))
	}
	return key + ": " + strings.Join(parts, ", ")
}

// showValue quotes a value where it would otherwise be hard to read in the
// list: empty, or holding spaces, the list's separators or control characters.
func showValue(v string) string {
	if v == "" || strings.ContainsAny(v, " ,;\"") || !strconv.CanBackquote(v) {
		return strconv.Quote(v)
	}
	return v
}

// rankList writes ascending ranks with runs shortened: "rank 3", "ranks 0-2,5".
func rankList(ranks []int) string {
	if len(ranks) == 1 {
		return "rank " + strconv.Itoa(ranks[0])
	}
	var b strings.Builder
	b.WriteString("ranks ")
	for i := 0; i < len(ranks); {
		j := i
		for j+1 < len(ranks) && ranks[j+1] == ranks[j]+1 {
			j++
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(ranks[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(ranks[j]))
		}
		i = j + 1
	}
	return b.String()
}
