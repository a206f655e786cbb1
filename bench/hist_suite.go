package main

import (
	"fmt"
	"strings"
)

// The history suite (issue 5): what per-file history costs on a store
// that holds much else. Each benchmark is one entry of histBenches, run
// when -only selects it (all by default), each giving its own tables.

func historySuite() Suite {
	return Suite{
		Name:     "history",
		Doc:      "H1-H2: per-file history on a large store: ls .history/FILE/ and deltafs log (H1), deltafs cat of old revisions (H2)",
		Run:      runHistorySuite,
		Children: map[string]ChildFunc{},
	}
}

// histBench is one benchmark of the history suite.
type histBench struct {
	id  string
	run func(e *Env, deltafsBin string) (Report, error)
}

// histBenches lists the suite's benchmarks in report order.
func histBenches() []histBench {
	return []histBench{{id: "H1", run: runH1}, {id: "H2", run: runH2}}
}

func runHistorySuite(env *Env) (Report, error) {
	bin, err := env.buildDeltafs()
	if err != nil {
		return Report{}, err
	}
	var rep Report
	for _, b := range histBenches() {
		if !env.Opts.selected(b.id) {
			continue
		}
		r, err := b.run(env, bin)
		if err != nil {
			return rep, fmt.Errorf("%s: %w", b.id, err)
		}
		rep.Intro = append(rep.Intro, r.Intro...)
		rep.Tables = append(rep.Tables, r.Tables...)
		rep.Notes = append(rep.Notes, r.Notes...)
		for _, t := range r.Tables {
			var s strings.Builder
			t.Markdown(&s)
			env.Logf("%s done:\n%s", b.id, s.String())
		}
	}
	return rep, nil
}
