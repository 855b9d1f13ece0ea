package main

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gradwire/gradwire/internal/datatest"
)

// TestCoded runs the command on a small fake Fashion-MNIST and checks the
// table, the CSV and the plots it writes.
func TestCoded(t *testing.T) {
	root := t.TempDir()
	datatest.WriteFakeFashion(t, root, 400, 100)
	dir := t.TempDir()
	out, _, err := run(t, "coded", "--data-dir", root, "--classes", "0,1", "--devices", "6", "--steps", "5", "--dropout", "0,0.3", "--out", dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"| logreg | uncoded | 6 | 1 / 1 | 0.00 |", "| svm | rlnc | 4 |", "| logreg | replication | 3 | 8 / 20 | 0.00 |", "| logreg | mds | 4 | 15 / 15 | 0.00 |", "6 devices; a budget of 10 rounds"} {
		if !strings.Contains(out, s) {
			t.Errorf("table lacks %q:\n%s", s, out)
		}
	}
	for _, f := range []string{"table.md", "coded.csv", "coded.png", "coded.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	fh, err := os.Open(filepath.Join(dir, "coded.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	recs, err := csv.NewReader(fh).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1+2*4*2 {
		t.Fatalf("coded.csv has %d rows, want a header and 16", len(recs))
	}
	for _, rec := range recs[1:] {
		// At drop-out 0 every scheme completes all 5 steps.
		if rec[4] == "0" && rec[13] != "5" {
			t.Errorf("%v: %s steps completed at drop-out 0, want 5", rec[:5], rec[13])
		}
	}
	table, _ := os.ReadFile(filepath.Join(dir, "table.md"))
	if string(table) != out {
		t.Error("table.md differs from the printed table")
	}
}

func TestCodedErrors(t *testing.T) {
	root := t.TempDir()
	datatest.WriteFakeFashion(t, root, 40, 10)
	wantErrors(t, []errorCase{
		{[]string{"coded", "--model", "tree"}, []string{`--model "tree"`, "logreg, svm"}},
		{[]string{"coded", "--schemes", "lt"}, []string{`--schemes "lt"`, "uncoded, replication, mds, rlnc"}},
		{[]string{"coded", "--dropout", "1"}, []string{"--dropout 1", "[0, 1)"}},
		{[]string{"coded", "--dropout", "-0.1"}, []string{"--dropout -0.1"}},
		{[]string{"coded", "--dropout", "0,0.1,0"}, []string{"--dropout 0", "given twice"}},
		{[]string{"coded", "--schemes", "mds,mds"}, []string{"--schemes mds", "given twice"}},
		{[]string{"coded", "--devices", "7"}, []string{"--devices 7", "even", "replication"}},
		{[]string{"coded", "--devices", "1"}, []string{"--devices 1", "2-256"}},
		{[]string{"coded", "--classes", "3"}, []string{"--classes [3]", "two different classes"}},
		{[]string{"coded", "--classes", "0,0"}, []string{"--classes [0 0]", "two different classes"}},
		{[]string{"coded", "--classes", "0,10"}, []string{"--classes [0 10]", "0-9"}},
		{[]string{"coded", "--steps", "0"}, []string{"--steps 0"}},
		{[]string{"coded", "--lr", "0"}, []string{"--lr 0", "> 0"}},
		{[]string{"coded", "--lambda", "-1"}, []string{"--lambda -1"}},
		{[]string{"coded", "--lr", "inf"}, []string{"--lr +Inf", "finite"}},
		{[]string{"coded", "--lambda", "inf"}, []string{"--lambda +Inf", "finite"}},
		{[]string{"coded", "--data-dir", filepath.Join(root, "missing")}, []string{"--data-dir", "missing", "no such folder"}},
	})
	// Odd device counts are fine without replication.
	if _, _, err := run(t, "coded", "--data-dir", root, "--classes", "0,1", "--devices", "5", "--schemes", "mds,rlnc", "--steps", "2", "--dropout", "0.1", "--out", t.TempDir()); err != nil {
		t.Fatalf("5 devices, MDS and RLNC: %v", err)
	}
}

// TestCodedHelp: the help names every flag and the schemes.
func TestCodedHelp(t *testing.T) {
	out, _, err := run(t, "coded", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"--model", "--schemes", "--dropout", "--devices", "--steps", "--lr", "--lambda", "--seed", "--classes", "--data-dir", "--out", "uncoded", "replication", "mds", "rlnc", "1e8"} {
		if !strings.Contains(out, s) {
			t.Errorf("help lacks %q", s)
		}
	}
}
