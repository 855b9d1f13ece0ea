package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gradwire/gradwire/internal/datatest"
)

func TestCoded(t *testing.T) {
	root := t.TempDir()
	datatest.WriteFakeFashion(t, root, 400, 100)
	dir := t.TempDir()
	out, _, err := run(t, "coded", "--data-dir", root, "--classes", "0,1", "--devices", "6", "--steps", "5", "--dropout", "0,0.3", "--out", dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"| logreg | uncoded | 6 | 0.00 |", "| svm | rlnc | 4 | 0.30 |", "| logreg | replication | 3 | 0.00 |", "| logreg | mds | 4 | 0.00 |"} {
		if !strings.Contains(out, s) {
			t.Errorf("table lacks %q:\n%s", s, out)
		}
	}
	for _, f := range []string{"table.md", "coded.csv", "coded.png", "coded.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	wantErrors(t, []errorCase{
		{[]string{"coded", "--model", "tree"}, []string{`--model "tree"`}},
		{[]string{"coded", "--schemes", "lt"}, []string{`--schemes "lt"`}},
		{[]string{"coded", "--dropout", "1"}, []string{"--dropout 1"}},
		{[]string{"coded", "--devices", "5"}, []string{"--devices 5", "even"}},
		{[]string{"coded", "--classes", "3"}, []string{"--classes [3]"}},
		{[]string{"coded", "--data-dir", root, "--classes", "0,0"}, []string{"--classes [0 0]", "two different classes"}},
	})
}
