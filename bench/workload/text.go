package workload

import (
	"math/rand/v2"
)

// vocabSeed fixes the vocabulary for all workloads, independent of the
// per-workload seed, so that every workload speaks the same "language".
const vocabSeed = 0x64656c7461

// vocabSize, the skewed word choice and the repeated lines below are
// tuned together so that generated text compresses about 3.7x with zstd at
// its default level (4.3x at -19), like real source code and prose: a
// smaller vocabulary compresses far too well, random words alone under 3x.
const vocabSize = 4096

// Text produces text-like bytes from a seeded generator. It is not safe
// for concurrent use.
type Text struct {
	r     *rand.Rand
	vocab [][]byte
	// recent holds the last lines written; a share of new lines repeat one
	// of them, as code and prose repeat phrases (`if err != nil {`).
	recent [recentLines][]byte
	nlines int
}

// recentLines and repeatOneIn set how often and how far back lines repeat:
// one line in repeatOneIn is a copy of one of the last recentLines lines.
// Without repeats zstd finds few matches in word salad and compresses it
// under 3x; with them the text lands at 3-4x like real text.
const (
	recentLines = 64
	repeatOneIn = 3
)

// NewRand returns the PCG generator used throughout this package for seed.
func NewRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// NewText returns a text generator drawing from seed.
func NewText(seed uint64) *Text {
	return &Text{r: NewRand(seed), vocab: buildVocab()}
}

// buildVocab makes the fixed vocabulary: the keywords, then pseudo-words
// of 2-10 lowercase letters, some with an upper-case first letter or an
// underscore, like identifiers.
func buildVocab() [][]byte {
	// Frequent short tokens of source code and prose first: they make the
	// text look (and compress) like code rather than random words.
	keywords := []string{
		"func", "return", "if", "else", "for", "range", "var", ":=", "=",
		"{", "}", "(", ")", "err", "nil", "!=", "==", "//", "the", "of",
		"and", "to", "in", "is", "a", "int", "string", "[]byte", "true", "false",
	}
	r := NewRand(vocabSeed)
	v := make([][]byte, 0, vocabSize)
	for _, k := range keywords {
		v = append(v, []byte(k))
	}
	for len(v) < vocabSize {
		n := 2 + r.IntN(9)
		w := make([]byte, n)
		for i := range w {
			w[i] = byte('a' + r.IntN(26))
		}
		switch r.IntN(8) {
		case 0:
			w[0] -= 'a' - 'A'
		case 1:
			w[r.IntN(n)] = '_'
		}
		v = append(v, w)
	}
	return v
}

// word picks a vocabulary entry with a skewed distribution: the product of
// three uniform draws favours low indexes (keywords and early words), a
// cheap stand-in for Zipf's law.
func (t *Text) word() []byte {
	a, b, c := t.r.Float64(), t.r.Float64(), t.r.Float64()
	return t.vocab[int(a*b*c*float64(len(t.vocab)))]
}

// line appends one line, either a repeat of a recent line or a fresh one:
// 0-3 tabs of indent, 2-12 words, an optional
// trailing punctuation mark, and a newline.
func (t *Text) line(dst []byte) []byte {
	if t.nlines >= recentLines && t.r.IntN(repeatOneIn) == 0 {
		return append(dst, t.recent[t.r.IntN(recentLines)]...)
	}
	start := len(dst)
	dst = t.fresh(dst)
	slot := &t.recent[t.nlines%recentLines]
	*slot = append((*slot)[:0], dst[start:]...)
	t.nlines++
	return dst
}

// fresh appends a new line of random words.
func (t *Text) fresh(dst []byte) []byte {
	for range t.r.IntN(4) {
		dst = append(dst, '\t')
	}
	n := 2 + t.r.IntN(11)
	for i := range n {
		if i > 0 {
			dst = append(dst, ' ')
		}
		dst = append(dst, t.word()...)
	}
	switch t.r.IntN(4) {
	case 0:
		dst = append(dst, ';')
	case 1:
		dst = append(dst, ',')
	}
	return append(dst, '\n')
}

// Fill returns exactly n bytes of text.
func (t *Text) Fill(n int) []byte {
	return t.Append(make([]byte, 0, n+256), n)[:n]
}

// Append appends exactly n bytes of text to dst.
func (t *Text) Append(dst []byte, n int) []byte {
	end := len(dst) + n
	for len(dst) < end {
		dst = t.line(dst)
	}
	return dst[:end]
}

// Rand exposes the generator's PRNG so that edit positions and text
// content come from one deterministic stream.
func (t *Text) Rand() *rand.Rand { return t.r }
