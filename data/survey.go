package data

// SplitStatus is what Survey finds for one split of a data set.
type SplitStatus struct {
	Split string // "train" or "test"
	// Dir is the folder the split is read from; empty when no folder has its files.
	Dir string
	// Examples is the number of examples; for text, characters (how many windows they
	// make depends on data.seq_len).
	Examples int
	// Err says why the split cannot be used: not found (wrapping ErrNotFound), a file
	// that does not decode, or a shape that disagrees with the other split's.
	Err error
}

// Survey opens each split of a data set as Open would, and reports where it is and how
// many examples it has, or why it cannot be used. The error is for what fails every
// split alike: an unknown name, or a data.dir that is not a folder.
func Survey(opts Options) ([]SplitStatus, error) {
	info, err := checkOptions(opts)
	if err != nil {
		return nil, err
	}
	if err := checkDataDir(opts.Dir); err != nil {
		return nil, err
	}
	if info.Shape == nil {
		opts.SeqLen = 1 // any window length opens the corpus; characters are counted
	}
	var out []SplitStatus
	for _, split := range []string{"train", "test"} {
		st := SplitStatus{Split: split}
		folder, paths, err := splitPaths(info, opts.Dir, split)
		if err != nil {
			st.Err = err
			out = append(out, st)
			continue
		}
		st.Dir = folder
		ds, err := openSplit(info, opts, split, paths)
		if err == nil {
			err = checkOtherSplit(info, opts.Dir, split, paths, ds)
		}
		switch {
		case err != nil:
			st.Err = err
		case info.Shape == nil:
			st.Examples = len(ds.(*Text).ids)
		default:
			st.Examples = ds.Len()
		}
		out = append(out, st)
	}
	return out, nil
}
