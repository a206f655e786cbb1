//go:build race

package objstore

// raceEnabled: the race detector slows the repack helper's start so much
// that the kill loop's rounds rarely reach the switch.
const raceEnabled = true
