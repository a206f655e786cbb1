package workload

// StoreS1 is the store issue's S1 workload: 600 revisions of an 8 MiB
// text, each 1-5 small edits (10-500 bytes) of the previous.
func StoreS1() Chain {
	return Chain{Name: "S1", Doc: "8 MiB text, 600 revisions of 1-5 edits of 10-500 B each",
		Seed: 31, BaseSize: 8 * MiB, Steps: 599,
		Edits: EditSpec{Count: 5, MinLen: 10, MaxLen: 500}, CountMin: 1}
}

// StoreS3 is the S3 workload: 2,000 revisions of a 1 MiB text, the long
// linear history that chain caps exist for.
func StoreS3() Chain {
	return Chain{Name: "S3", Doc: "1 MiB text, 2,000 revisions of 1-5 edits of 10-500 B each",
		Seed: 33, BaseSize: 1 * MiB, Steps: 1999,
		Edits: EditSpec{Count: 5, MinLen: 10, MaxLen: 500}, CountMin: 1}
}

// StoreChain returns S1 or S3 by name (tests use smaller chains by value).
func StoreChain(name string) (Chain, bool) {
	for _, c := range []Chain{StoreS1(), StoreS3()} {
		if c.Name == name {
			return c, true
		}
	}
	return Chain{}, false
}
