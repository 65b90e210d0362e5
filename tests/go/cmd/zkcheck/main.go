// Command zkcheck checks a ZooKeeper operation history (JSONL, see tests/ensemble/README.md) for
// linearizability per znode (porcupine) and for per-session ordering.
//
//	go run ./cmd/zkcheck [-reads-all] [-timeout 60s] [-html DIR] HISTORY.jsonl
//
// Exit status: 0 when every check passes, 1 on a violation (or a timed-out check), 2 on bad input.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"zoolog/tests/go/zkcheck"
)

func main() {
	readsAll := flag.Bool("reads-all", false, "check unsynced reads for linearizability too (ZooKeeper does not promise it)")
	timeout := flag.Duration("timeout", 60*time.Second, "linearizability search limit per key (0: none)")
	html := flag.String("html", "", "directory for porcupine's visualization of failing keys (default: next to the history)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: zkcheck [-reads-all] [-timeout D] [-html DIR] HISTORY.jsonl")
		os.Exit(2)
	}
	path := flag.Arg(0)
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ops, err := zkcheck.ReadHistory(f)
	f.Close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
		os.Exit(2)
	}
	dir := *html
	if dir == "" {
		dir = filepath.Dir(path)
	}
	res := zkcheck.Check(ops, zkcheck.Options{ReadsAll: *readsAll, Timeout: *timeout, HTMLDir: dir})
	if res.OK {
		fmt.Printf("zkcheck: ok: %d ops on %d keys are linearizable and keep session order\n", res.Ops, res.Keys)
		return
	}
	fmt.Printf("zkcheck: FAILED: %d violation(s) in %d ops on %d keys\n", len(res.Violations), res.Ops, res.Keys)
	for i, v := range res.Violations {
		if i == 10 {
			fmt.Printf("... and %d more\n", len(res.Violations)-10)
			break
		}
		fmt.Println(v)
	}
	for _, h := range res.HTMLFiles {
		fmt.Println("visualization:", h)
	}
	os.Exit(1)
}
