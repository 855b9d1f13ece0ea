package dist

// SetLazyMean turns LazyMeanExchanger on or off for the engines of a test and
// returns the function that restores the setting.
func SetLazyMean(on bool) (restore func()) {
	old := lazyMean
	lazyMean = on
	return func() { lazyMean = old }
}

// LazyMeanSteps is how many fused steps of e ran on a lazily read mean.
func LazyMeanSteps(e *Engine) int {
	if e.fused == nil {
		return 0
	}
	return e.fused.lazySteps
}
