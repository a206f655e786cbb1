package objstore

// A cheap test of whether two texts share long runs of bytes, run before
// a similar file's delta is computed (see similarCut): most similar files
// of a store of many small files (same base name, same size class) share
// nothing with the target, and a copy delta against each costs an index
// of the base and a scan of the target, where this costs a rolling hash
// over the base.
//
// It hashes runSamples windows of runSampleLen bytes spread evenly over the
// target, then rolls a hash of runSampleLen bytes over the base and counts
// the samples it meets. A copy delta copies runs of at least 48 bytes
// (delta's minCopy); a sample lying inside a copied run is met, so if the
// delta copies a fraction f of the target about f x runSamples samples
// are. A similar file must save half the fulltext to be chosen (widen),
// which takes f well over 1/2: runSampleMin of 32 (1/8) leaves a wide
// margin for samples straddling the edges of the runs. Hash collisions
// only ever count a sample as met, which errs toward computing the delta.
const (
	runSampleLen = 32
	runSamples   = 32
	runSampleMin = runSamples / 8
	// runSampleMinText: below this the delta is cheap anyway; compute it.
	runSampleMinText = 4 * runSampleLen * runSamples
	runSamplePrime   = 16777619 // FNV's 32-bit prime, as the rolling multiplier
)

// sharesRuns reports whether target may copy enough of base for a
// delta against it to be worth computing.
func sharesRuns(base, target []byte) bool {
	if len(target) < runSampleMinText || len(base) < runSampleLen {
		return len(base) >= runSampleLen || len(target) < runSampleMinText
	}
	var samples [runSamples]uint32
	var bloom [64]uint64 // one bit per hash >> 20: a cheap first filter
	step := (len(target) - runSampleLen) / (runSamples - 1)
	for i := range samples {
		p := i * step
		samples[i] = windowHash(target[p : p+runSampleLen])
		bloom[samples[i]>>26] |= 1 << (samples[i] >> 20 & 63)
	}
	var met [runSamples]bool
	hits := 0
	var pow uint32 = 1 // runSamplePrime^(runSampleLen-1): what the leaving byte weighs
	for range runSampleLen - 1 {
		pow *= runSamplePrime
	}
	h := windowHash(base[:runSampleLen])
	for i := runSampleLen; ; i++ {
		if bloom[h>>26]&(1<<(h>>20&63)) != 0 {
			for k, s := range samples {
				if s == h && !met[k] {
					met[k] = true
					if hits++; hits >= runSampleMin {
						return true
					}
				}
			}
		}
		if i == len(base) {
			return false
		}
		h = (h-uint32(base[i-runSampleLen])*pow)*runSamplePrime + uint32(base[i])
	}
}

// windowHash is the rolling hash of one window, from scratch.
func windowHash(w []byte) uint32 {
	var h uint32
	for _, b := range w {
		h = h*runSamplePrime + uint32(b)
	}
	return h
}
