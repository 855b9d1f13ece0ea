package compress

import (
	"maps"
	"slices"
)

// Registry maps a compressor name to its builder. Every entry passes the
// conformance test in conformance_test.go. "none" has no builder: the
// exchange then all-reduces every tensor dense, which is the baseline.
var Registry = map[string]Builder{
	"none":      nil,
	"fp16":      newFP16,
	"dgc":       newDGC,
	"adacomp":   newAdaComp,
	"topk":      newTopK,
	"randomk":   newRandomK,
	"onebit":    newOneBit,
	"efsignsgd": newEFSignSGD,
	"powersgd":  newPowerSGD,
	"terngrad":  newTernGrad,
	"qsgd":      newQSGD,
	"scalecom":  newScaleCom,
	"gradiveq":  newGradiVeQ,
	"lgc":       newLGC,
}

// Names lists the registered compressors, sorted.
func Names() []string { return slices.Sorted(maps.Keys(Registry)) }
