// Package zkcheck checks a recorded history of ZooKeeper operations (the JSONL format of
// tests/ensemble/README.md) for linearizability with porcupine, one znode at a time, and for
// ZooKeeper's per-session ordering guarantees.
//
// Each znode is a register with a version: create makes it (version 0), set and a successful cas
// bump the version, get observes value and version. Writes whose outcome is unknown (timeout,
// connection loss, session expiry) may or may not have taken effect: they return at +infinity.
// Reads are linearizable in ZooKeeper only after a sync, so by default only synced reads (and
// reads with no record of sync at all when ReadsAll is set) enter the linearizability check; every
// completed read enters the session checks.
package zkcheck

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Op is one line of a history file.
type Op struct {
	Session         string  `json:"session"`
	Key             string  `json:"key"`
	Op              string  `json:"op"` // create | set | cas | get
	Value           *string `json:"value,omitempty"`
	ExpectedVersion *int64  `json:"expected_version,omitempty"`
	Call            int64   `json:"call"`
	Return          *int64  `json:"return,omitempty"`
	Outcome         string  `json:"outcome"` // ok | fail | unknown
	Error           string  `json:"error,omitempty"`
	Version         *int64  `json:"version,omitempty"`
	Mzxid           *int64  `json:"mzxid,omitempty"`
	Synced          bool    `json:"synced,omitempty"`
	Line            int     `json:"-"`
}

func (o Op) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "line %d %s %s(%s", o.Line, o.Session, o.Op, o.Key)
	if o.Op != "get" && o.Value != nil {
		fmt.Fprintf(&b, ", %q", *o.Value)
	}
	if o.ExpectedVersion != nil {
		fmt.Fprintf(&b, ", expect v%d", *o.ExpectedVersion)
	}
	b.WriteString(") -> ")
	b.WriteString(o.Outcome)
	if o.Error != "" {
		b.WriteString(" " + o.Error)
	}
	if o.Outcome == "ok" {
		if o.Op == "get" && o.Value != nil {
			fmt.Fprintf(&b, " %q", *o.Value)
		}
		if o.Version != nil {
			fmt.Fprintf(&b, " v%d", *o.Version)
		}
		if o.Mzxid != nil {
			fmt.Fprintf(&b, " mzxid 0x%x", *o.Mzxid)
		}
	}
	if o.Op == "get" && o.Synced {
		b.WriteString(" (synced)")
	}
	return b.String()
}

// ReadHistory parses a JSONL history; blank lines and lines starting with # are skipped.
func ReadHistory(r io.Reader) ([]Op, error) {
	var ops []Op
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var op Op
		if err := json.Unmarshal([]byte(line), &op); err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
		op.Line = n
		if err := validate(op); err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
		ops = append(ops, op)
	}
	return ops, sc.Err()
}

func validate(op Op) error {
	switch op.Op {
	case "create", "set", "get":
	case "cas":
		if op.ExpectedVersion == nil {
			return fmt.Errorf("cas without expected_version")
		}
	default:
		return fmt.Errorf("unknown op %q", op.Op)
	}
	switch op.Outcome {
	case "ok", "fail":
		if op.Return == nil {
			return fmt.Errorf("%s op without return time", op.Outcome)
		}
	case "unknown":
	default:
		return fmt.Errorf("unknown outcome %q", op.Outcome)
	}
	if op.Op != "get" && op.Value == nil {
		return fmt.Errorf("%s without value", op.Op)
	}
	if op.Op == "get" && op.Outcome == "ok" && op.Value == nil {
		return fmt.Errorf("ok get without value")
	}
	if op.Key == "" || op.Session == "" {
		return fmt.Errorf("key and session are required")
	}
	return nil
}

// ---- the register model ------------------------------------------------------------------------

type state struct {
	Exists  bool
	Value   string
	Version int64
}

type input struct {
	Op       string
	Value    string
	Expected int64
}

type output struct {
	Outcome string
	Error   string
	Value   string
	Version int64 // -1: not reported
	Op      Op
}

func step(s0, in0, out0 interface{}) (bool, interface{}) {
	s, in, out := s0.(state), in0.(input), out0.(output)
	switch in.Op {
	case "create":
		created := state{true, in.Value, 0}
		switch out.Outcome {
		case "ok":
			return !s.Exists, created
		case "unknown":
			if !s.Exists {
				return true, created
			}
			return true, s
		default:
			if out.Error == "NODEEXISTS" {
				return s.Exists, s
			}
			return true, s
		}
	case "set", "cas":
		applicable := s.Exists && (in.Op == "set" || s.Version == in.Expected)
		next := state{true, in.Value, s.Version + 1}
		switch out.Outcome {
		case "ok":
			return applicable && (out.Version < 0 || out.Version == s.Version+1), next
		case "unknown":
			if applicable {
				return true, next
			}
			return true, s
		default:
			switch out.Error {
			case "NONODE":
				return !s.Exists, s
			case "BADVERSION":
				return s.Exists && in.Op == "cas" && s.Version != in.Expected, s
			}
			return true, s
		}
	case "get":
		if out.Outcome == "ok" {
			return s.Exists && s.Value == out.Value && (out.Version < 0 || out.Version == s.Version), s
		}
		if out.Error == "NONODE" {
			return !s.Exists, s
		}
		return true, s
	}
	return false, s
}

var model = porcupine.Model{
	Init: func() interface{} { return state{} },
	Step: step,
	DescribeOperation: func(in0, out0 interface{}) string {
		return out0.(output).Op.String()
	},
	DescribeState: func(s0 interface{}) string {
		s := s0.(state)
		if !s.Exists {
			return "(absent)"
		}
		return fmt.Sprintf("%q v%d", s.Value, s.Version)
	},
}

// Options tunes the check.
type Options struct {
	ReadsAll bool          // put unsynced reads into the linearizability check too
	Timeout  time.Duration // per key; 0 = none (an Unknown result counts as a failure)
	HTMLDir  string        // where to write porcupine's visualization of a failing key ("" = none)
}

// Result summarizes a check.
type Result struct {
	OK         bool
	Keys       int
	Ops        int
	Violations []string // human-readable, one per problem
	HTMLFiles  []string
}

func toPorcupine(ops []Op, readsAll bool) []porcupine.Operation {
	clients := map[string]int{}
	var out []porcupine.Operation
	for _, o := range ops {
		if o.Op == "get" {
			if !(o.Synced || readsAll) {
				continue
			}
			if o.Outcome == "unknown" || (o.Outcome == "fail" && o.Error != "NONODE") {
				continue // a read that returned nothing constrains nothing
			}
		}
		id, ok := clients[o.Session]
		if !ok {
			id = len(clients)
			clients[o.Session] = id
		}
		in := input{Op: o.Op}
		if o.Value != nil && o.Op != "get" {
			in.Value = *o.Value
		}
		if o.ExpectedVersion != nil {
			in.Expected = *o.ExpectedVersion
		}
		res := output{Outcome: o.Outcome, Error: o.Error, Version: -1, Op: o}
		if o.Op == "get" && o.Value != nil {
			res.Value = *o.Value
		}
		if o.Version != nil {
			res.Version = *o.Version
		}
		ret := int64(math.MaxInt64)
		if o.Outcome != "unknown" && o.Return != nil {
			ret = *o.Return
		}
		out = append(out, porcupine.Operation{ClientId: id, Input: in, Call: o.Call, Output: res, Return: ret})
	}
	return out
}

// Check runs every check over a history.
func Check(ops []Op, opt Options) Result {
	res := Result{OK: true, Ops: len(ops)}
	byKey := map[string][]Op{}
	for _, o := range ops {
		byKey[o.Key] = append(byKey[o.Key], o)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	res.Keys = len(keys)
	for _, k := range keys {
		hist := toPorcupine(byKey[k], opt.ReadsAll)
		verdict, info := porcupine.CheckOperationsVerbose(model, hist, opt.Timeout)
		if verdict == porcupine.Ok {
			continue
		}
		res.OK = false
		res.Violations = append(res.Violations, summarize(k, verdict, hist, info))
		if opt.HTMLDir != "" {
			name := strings.NewReplacer("/", "_", " ", "_").Replace(strings.TrimPrefix(k, "/"))
			path := fmt.Sprintf("%s/linearizability-%s.html", opt.HTMLDir, name)
			if err := os.MkdirAll(opt.HTMLDir, 0o755); err == nil {
				if err := porcupine.VisualizePath(model, info, path); err == nil {
					res.HTMLFiles = append(res.HTMLFiles, path)
				}
			}
		}
	}
	for _, v := range sessionViolations(ops) {
		res.OK = false
		res.Violations = append(res.Violations, v)
	}
	for _, v := range duplicateVersions(ops) {
		res.OK = false
		res.Violations = append(res.Violations, v)
	}
	return res
}

// summarize names the longest prefix porcupine could linearize and the operations that could not
// follow it: the smallest useful counterexample without a second search.
func summarize(key string, verdict porcupine.CheckResult, hist []porcupine.Operation, info porcupine.LinearizationInfo) string {
	var b strings.Builder
	if verdict == porcupine.Unknown {
		fmt.Fprintf(&b, "key %s: linearizability check timed out (%d ops)", key, len(hist))
		return b.String()
	}
	partials := info.PartialLinearizationsOperations()
	var longest []porcupine.Operation
	for _, part := range partials {
		for _, lin := range part {
			if len(lin) > len(longest) {
				longest = lin
			}
		}
	}
	fmt.Fprintf(&b, "key %s: not linearizable: at most %d of %d ops linearize", key, len(longest), len(hist))
	s := model.Init()
	for _, o := range longest {
		_, s = step(s, o.Input, o.Output)
	}
	from := len(longest) - 3
	if from < 0 {
		from = 0
	}
	if len(longest) > 0 {
		b.WriteString("\n  last ops of the longest linearization:")
		for _, o := range longest[from:] {
			b.WriteString("\n    " + o.Output.(output).Op.String())
		}
	}
	fmt.Fprintf(&b, "\n  register then: %s", model.DescribeState(s))
	// The ops left over that had to come next: those whose call precedes every left-over return.
	done := map[int]bool{}
	for _, o := range longest {
		done[o.Output.(output).Op.Line] = true
	}
	var left []porcupine.Operation
	minReturn := int64(math.MaxInt64)
	for _, o := range hist {
		if !done[o.Output.(output).Op.Line] {
			left = append(left, o)
			if o.Return < minReturn {
				minReturn = o.Return
			}
		}
	}
	b.WriteString("\n  none of these can come next:")
	shown := 0
	for _, o := range left {
		if o.Call <= minReturn && shown < 6 {
			b.WriteString("\n    " + o.Output.(output).Op.String())
			shown++
		}
	}
	return b.String()
}

// sessionViolations checks ZooKeeper's per-session guarantees over completed operations in issue
// (call) order: a session never observes a key at an older version than it observed or wrote
// before, its writes get versions and zxids above everything it observed, and a read of key k
// cannot miss an acknowledged write to k whose zxid is at most the highest zxid the session saw.
func sessionViolations(ops []Op) []string {
	// Acknowledged writes per key, by mzxid.
	writes := map[string][]Op{}
	for _, o := range ops {
		if o.Op != "get" && o.Outcome == "ok" && o.Mzxid != nil {
			writes[o.Key] = append(writes[o.Key], o)
		}
	}
	for k := range writes {
		w := writes[k]
		sort.Slice(w, func(i, j int) bool { return *w[i].Mzxid < *w[j].Mzxid })
	}
	bySession := map[string][]Op{}
	var sessions []string
	for _, o := range ops {
		if _, ok := bySession[o.Session]; !ok {
			sessions = append(sessions, o.Session)
		}
		bySession[o.Session] = append(bySession[o.Session], o)
	}
	var out []string
	for _, s := range sessions {
		list := bySession[s]
		sort.SliceStable(list, func(i, j int) bool { return list[i].Call < list[j].Call })
		seenVersion := map[string]int64{}
		seenBy := map[string]Op{}
		var seenZxid int64 = -1
		var zxidBy Op
		for _, o := range list {
			if o.Outcome == "fail" && o.Op == "get" && o.Error == "NONODE" {
				if _, ok := seenVersion[o.Key]; ok {
					out = append(out, fmt.Sprintf("session %s: %s\n  after it saw %s", s, o, seenBy[o.Key]))
				}
				continue
			}
			if o.Outcome != "ok" || o.Version == nil {
				continue
			}
			v := *o.Version
			if prev, ok := seenVersion[o.Key]; ok {
				if o.Op == "get" && v < prev {
					out = append(out, fmt.Sprintf("session %s: read went back in time: %s\n  after %s", s, o, seenBy[o.Key]))
				}
				if o.Op != "get" && v <= prev {
					out = append(out, fmt.Sprintf("session %s: write got an old version: %s\n  after %s", s, o, seenBy[o.Key]))
				}
			}
			if o.Mzxid != nil {
				m := *o.Mzxid
				if o.Op == "get" {
					for _, w := range writes[o.Key] {
						if *w.Mzxid > m && *w.Mzxid <= seenZxid {
							out = append(out, fmt.Sprintf("session %s: stale read %s\n  misses acknowledged %s\n  though the session had seen zxid 0x%x (%s)", s, o, w, seenZxid, zxidBy))
							break
						}
					}
				} else if m <= seenZxid {
					out = append(out, fmt.Sprintf("session %s: write zxid 0x%x not above zxid 0x%x it had seen: %s\n  after %s", s, m, seenZxid, o, zxidBy))
				}
				if m > seenZxid {
					seenZxid, zxidBy = m, o
				}
			}
			if prev, ok := seenVersion[o.Key]; !ok || v > prev {
				seenVersion[o.Key], seenBy[o.Key] = v, o
			}
		}
	}
	return out
}

// duplicateVersions: two acknowledged writes of one key cannot have produced the same version.
func duplicateVersions(ops []Op) []string {
	seen := map[string]Op{}
	var out []string
	for _, o := range ops {
		if o.Op == "get" || o.Outcome != "ok" || o.Version == nil {
			continue
		}
		id := fmt.Sprintf("%s@%d", o.Key, *o.Version)
		if prev, ok := seen[id]; ok {
			out = append(out, fmt.Sprintf("two acknowledged writes made version %d of %s (one was lost):\n    %s\n    %s", *o.Version, o.Key, prev, o))
			continue
		}
		seen[id] = o
	}
	return out
}
